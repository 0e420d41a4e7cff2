"""What each stage folder was made from, so that no stale folder is reused and none is left mixed.

Every stage records the content digest of the folder it read (`input_sha256`): the resumable stages
(regenerate, cache) in their `settings.json`, written before their first shard, and tokenize in its
manifest. A resumable stage never resumes into a folder made with other settings or from another input
(`claim_folder`); a stage that rebuilds its folder whole (prepare, tokenize) never changes it under
a later stage's folder made from the old one (`replace_folder`). Either refuses with one line, or, with
`overwrite` (`domino-data overwrite=true`), redoes the folder and removes the later ones made from it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from domino_train.data.shards import write_json_atomic

SETTINGS = "settings.json"
DATA_FILES = ("shard-*.jsonl", "data-*.arrow")  # a JSONL stage's shards, a tokenized set's Arrow files
_FIX = "pass overwrite=true to redo it (and the later stages), or choose a new name="


def _data_files(folder: Path) -> list[Path]:
    return sorted(p for pattern in DATA_FILES for p in Path(folder).glob(pattern))


def content_digest(folder: Path) -> str:
    """sha256 over a stage folder's data files (names and bytes, in name order): what a later stage read."""
    files = _data_files(folder)
    if not files:
        raise FileNotFoundError(f"{folder}: no data files (run the stage that writes them first)")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def _remove(folders: Sequence[Path]) -> None:
    for folder in folders:
        if folder.exists():
            print(f"overwrite: removing {folder}")
            shutil.rmtree(folder)


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 24 else text[:21] + "..."


def claim_folder(folder: Path, settings: dict[str, Any], overwrite: bool, dependents: Sequence[Path] = ()) -> None:
    """Make `folder` the output of a resumable stage run with `settings` (its `input_sha256` among them).

    A folder recorded with other settings, or holding files without a record, is redone with
    `overwrite` (emptied, with the `dependents` made from it) and refused otherwise."""
    folder = Path(folder)
    settings = json.loads(json.dumps(settings))  # as the record will read back
    recorded = folder / SETTINGS
    if recorded.is_file():
        previous = json.loads(recorded.read_text())
        changed = sorted(k for k in previous.keys() | settings.keys() if previous.get(k) != settings.get(k))
        problem = "was made with other settings or input (" + ", ".join(
            f"{k}: {_short(previous.get(k))} -> {_short(settings.get(k))}" for k in changed
        )
        problem += ")"
    else:
        changed = [folder] if folder.is_dir() and any(folder.iterdir()) else []
        problem = f"holds files but no {SETTINGS} saying what they were made from"
    if changed:
        if not overwrite:
            raise ValueError(f"{folder} {problem}; {_FIX}")
        _remove([folder, *dependents])
    write_json_atomic(recorded, settings)


def replace_folder(new: Path, folder: Path, overwrite: bool, dependents: Sequence[Path] = ()) -> None:
    """Put the finished output `new` in place of `folder`. Where that changes the folder's content while
    a later stage's folder (`dependents`) was made from it, nothing is touched unless `overwrite`, which
    removes those folders."""
    made_from_it = [d for d in dependents if d.exists()]
    if made_from_it and (not _data_files(folder) or content_digest(folder) != content_digest(new)):
        if not overwrite:
            names = ", ".join(str(d) for d in made_from_it)
            raise ValueError(
                f"{folder} would change (its input or settings changed) under {names} made from it; {_FIX}"
            )
        _remove(made_from_it)
    if folder.exists():
        shutil.rmtree(folder)
    new.rename(folder)
