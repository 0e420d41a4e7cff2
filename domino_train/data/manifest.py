"""Provenance recorded beside every tokenized set (and, through training, in every exported drafter)."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

from inference.targets.adapter import TargetModel


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
    template = getattr(target.tokenizer, "chat_template", None) or ""
    return {
        "name": target.name,
        "name_or_path": getattr(target.config, "_name_or_path", None),
        "revision": getattr(target.config, "_commit_hash", None),
        "model_type": target.config.model_type,
        "vocab_size": target.config.vocab_size,
        "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
        "chat_template_kwargs": target.chat_template_kwargs,
    }


def timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
