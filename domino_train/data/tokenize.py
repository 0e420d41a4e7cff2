"""Stage 3, tokenize: conversations -> a `datasets` Arrow set of `input_ids` / `loss_mask` + manifest.

Rows stream into Arrow (memory stays flat whatever the set size); a conversation becomes one row, or
several sharing its id where the template renders earlier turns unlike the prompts they were generated
from (`loss_mask.py`); one the template cannot be masked for, or with no assistant token left after
truncation to `max_length`, is counted and skipped, and a
stage that keeps no row ends with one line naming the reason. The manifest (`manifest.json` beside the
Arrow files) records source counts, the digest of the rows read (`input_sha256`), target and template
(training refuses a set made for another target), sampling settings, token counts and the git
revision; training logs it and exported drafters keep a copy.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import datasets
from datasets.arrow_writer import ArrowWriter

from domino_train.data.drops import Drops, nothing_kept
from domino_train.data.freshness import content_digest, replace_folder
from domino_train.data.loss_mask import tokenize_conversation
from domino_train.data.manifest import git_revision, target_record, timestamp
from domino_train.data.schema import MalformedRow
from domino_train.data.shards import read_shards, write_json_atomic
from inference.targets.adapter import TargetModel

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "input_ids": datasets.Sequence(datasets.Value("int32")),
        "loss_mask": datasets.Sequence(datasets.Value("int8")),
    }
)
MANIFEST = "manifest.json"


def tokenize(
    target: TargetModel,
    in_dir: str | Path,
    out_dir: str | Path,
    max_length: int = 2048,
    end_of_turn: str | None = None,
    lineage: dict[str, Any] | None = None,
    overwrite: bool = False,
    dependents: Sequence[Path] = (),
) -> dict[str, Any]:
    """Write the tokenized set to `out_dir` (replaced atomically); returns the manifest.

    A set that differs from the folder's present one never replaces it under `dependents` (the feature
    cache made from it) unless `overwrite`, which removes those (`freshness.replace_folder`)."""
    in_dir, out_dir = Path(in_dir), Path(out_dir)
    counts: Counter = Counter()
    drops = Drops()  # the first examples of each reason, for the error when no row is kept
    input_sha256 = content_digest(in_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-"))
    try:
        # Rows stream into one Arrow file, then `save_to_disk` shards it: memory stays flat.
        arrow_file = tmp / "rows.arrow"
        with ArrowWriter(features=FEATURES, path=str(arrow_file)) as writer:
            for row in _tokenized_rows(target, in_dir, max_length, end_of_turn, counts, drops):
                writer.write(row)
            writer.finalize()
        if not counts["rows"]:
            raise nothing_kept("tokenize", drops)
        datasets.Dataset.from_file(str(arrow_file)).save_to_disk(str(tmp / "set"))
        manifest = {
            "created": timestamp(),
            "git_revision": git_revision(),
            "target": target_record(target),
            "max_length": max_length,
            "end_of_turn": end_of_turn or target.tokenizer.eos_token,
            "counts": dict(sorted(counts.items())),
            "input": str(in_dir),
            "input_sha256": input_sha256,
            "lineage": lineage or {},
        }
        write_json_atomic(tmp / "set" / MANIFEST, manifest)
        replace_folder(tmp / "set", out_dir, overwrite, dependents)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"tokenize: {dict(sorted(counts.items()))}")
    return manifest


def _tokenized_rows(
    target: TargetModel,
    in_dir: Path,
    max_length: int,
    end_of_turn: str | None,
    counts: Counter,
    drops: Drops,
) -> Iterator[dict[str, Any]]:
    """The rows of the conversations in `in_dir`, tokenized, as they are read; `counts` and `drops` say
    what was read, kept and dropped."""
    for row in read_shards(in_dir):
        counts["rows_in"] += 1
        try:
            pieces = tokenize_conversation(
                target.tokenizer, row["conversations"], max_length, target.chat_template_kwargs, end_of_turn
            )
        except MalformedRow as e:
            counts[f"dropped_{e.reason}"] += 1
            drops.add(e.reason, f"row {row['id']}", e.detail)
            continue
        counts["conversations"] += 1
        for ids, mask in pieces:  # several when the template renders earlier turns unlike their prompts
            counts["rows"] += 1
            counts["tokens"] += len(ids)
            counts["assistant_tokens"] += sum(mask)
            counts["truncated"] += int(len(ids) == max_length)
            yield {"id": row["id"], "input_ids": ids, "loss_mask": mask}


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the tokenized set at `path`; a clear error when `path` is not one."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        raise FileNotFoundError(f"{path}: not a tokenized set (no {MANIFEST}); run `domino-data` stage tokenize")
    return json.loads((path / MANIFEST).read_text())


def load_tokenized(path: str | Path) -> tuple[datasets.Dataset, dict[str, Any]]:
    """The tokenized set and its manifest; a clear error when `path` is not one."""
    manifest = read_manifest(path)
    return datasets.load_from_disk(str(path)), manifest
