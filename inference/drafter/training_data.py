"""What a drafter folder says about the data it was trained on (`data_manifest.json`, written by
`domino-export`), read where serving needs it: the chat template its training text was rendered with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inference.targets.chat_template import chat_template_mismatch, chat_template_record

DATA_MANIFEST_NAME = "data_manifest.json"


def training_renderings(folder: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(set path, target record) of every training set the folder's manifest names; [] without one.

    A manifest is one tokenized set's (`{"target": ...}`) or a list of them (`{"sets": [{path, manifest}]}`)."""
    path = Path(folder) / DATA_MANIFEST_NAME
    if not path.is_file():
        return []
    manifest = json.loads(path.read_text())
    sets = manifest.get("sets") or [{"path": manifest.get("path", str(folder)), "manifest": manifest}]
    return [
        (str(s.get("path")), s["manifest"]["target"])
        for s in sets
        if isinstance((s.get("manifest") or {}).get("target"), dict)
    ]


def chat_template_warning(folder: str | Path, tokenizer: Any, chat_template_kwargs: dict[str, Any]) -> str | None:
    """One line when a training set of the drafter at `folder` was rendered with another chat template (or
    other template arguments) than the target renders prompts with now; None when they agree or are unknown."""
    current = chat_template_record(tokenizer, chat_template_kwargs)
    for set_path, record in training_renderings(folder):
        mismatch = chat_template_mismatch(record, current)
        if mismatch:
            return (
                f"drafter {folder} was trained on text rendered with {mismatch} (set {set_path}): its drafts "
                "follow text the target will not write here, so few are accepted; decode with the training's "
                "target.chat_template_kwargs, or train on data made with this template"
            )
    return None
