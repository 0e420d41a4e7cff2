"""Provenance recorded beside every tokenized set (and, through training, in every exported drafter)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from inference.targets.adapter import TargetModel
from inference.targets.chat_template import chat_template_record


def git_revision() -> str:
    """`<commit>` or `<commit>-dirty` of this project's checkout, or "unknown" outside git."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def target_record(target: TargetModel) -> dict[str, Any]:
    """Which target (name, path, revision when known) and which chat template produced a set."""
    return {
        "name": target.name,
        "name_or_path": getattr(target.config, "_name_or_path", None),
        "revision": getattr(target.config, "_commit_hash", None),
        "model_type": target.config.model_type,
        "vocab_size": target.config.vocab_size,
        **chat_template_record(target.tokenizer, target.chat_template_kwargs),
    }


def _same_name(a: str | None, b: str | None) -> bool:
    """Equal names, or two spellings of one local folder."""
    if a == b:
        return True
    folders = [Path(n).expanduser() for n in (a, b) if n]
    return len(folders) == 2 and all(f.is_dir() for f in folders) and folders[0].resolve() == folders[1].resolve()


def _described(record: dict[str, Any]) -> str:
    vocab, template = record.get("vocab_size"), record.get("chat_template_sha256")
    details = [f"{vocab} tokens" if vocab else "", f"chat template {template[:8]}" if template else ""]
    return f"{record.get('name')}" + (f" ({', '.join(d for d in details if d)})" if any(details) else "")


def target_mismatch(recorded: dict[str, Any], target: TargetModel) -> str | None:
    """How the target a set was made for (`target_record`) differs from `target`, or None when it does not.

    Compared: the name, the vocabulary size and the chat template's hash (a field the record lacks is
    not compared)."""
    current = target_record(target)
    differs = not _same_name(recorded.get("name"), current["name"]) or any(
        key in recorded and recorded[key] != current[key] for key in ("vocab_size", "chat_template_sha256")
    )
    return f"{_described(recorded)}, not {_described(current)}" if differs else None


def timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
