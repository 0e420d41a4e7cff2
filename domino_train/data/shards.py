"""JSONL shards: the on-disk unit of the prepare and regenerate stages.

A shard is `shard-00000.jsonl`, written to a temporary name and renamed once complete, so the presence
of a shard means all its rows are there; this is what makes a killed run resumable without duplicating
or losing rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:05d}.jsonl"


def write_jsonl_atomic(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows to `path` via a temporary file; returns the row count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def write_json_atomic(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False))
    os.replace(tmp, path)


def list_shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("shard-*.jsonl"))


def read_shards(folder: Path) -> Iterator[dict[str, Any]]:
    """All rows of a stage's output, in shard order."""
    shards = list_shards(folder)
    if not shards:
        raise FileNotFoundError(f"{folder}: no shard-*.jsonl files (run the stage that writes them first)")
    for shard in shards:
        with open(shard, encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)
