"""Read an offline W&B run (`<run>/wandb/offline-run-*/run-<id>.wandb`) without a server.

The file is W&B's transaction log: a 7-byte header (`:W&B`, magic 0xBEE1, version 0), then LevelDB-log
framed records (32 KiB blocks; each chunk = crc32 (4 bytes), length (2), type (1: full, 2: first,
3: middle, 4: last)) whose payloads are `wandb_internal_pb2.Record` protobufs. We keep the run record
(id, project, group, job type, tags), the config updates and the history rows. A requeued run writes one
file per attempt under the same id; `merge` joins them in order.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = struct.Struct("<4sHB")
_CHUNK = struct.Struct("<IHB")
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


class WandbFileError(ValueError):
    """Not a W&B transaction log this reader understands."""


@dataclass
class WandbFileRun:
    """What one `.wandb` file holds: the run's identity, its config and its history rows."""

    run_id: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one dict per wandb.log call, in order
    summary: dict[str, Any] = field(default_factory=dict)


def _payloads(data: bytes, path: Path) -> list[bytes]:
    if len(data) < _HEADER.size or _HEADER.unpack_from(data)[:2] != (b":W&B", 0xBEE1):
        raise WandbFileError(f"{path} is not a W&B run file (no ':W&B' header)")
    out, pending, pos = [], b"", _HEADER.size
    while pos + _CHUNK.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK.size:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = _CHUNK.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding at the end of a block or of a file still being written
            pos += left
            continue
        chunk = data[pos + _CHUNK.size : pos + _CHUNK.size + length]
        pos += _CHUNK.size + length
        if kind in (_FULL, _FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (_FULL, _LAST):
            out.append(pending)
    return out


def _value(item: Any) -> Any:
    if item.value_json:
        return json.loads(item.value_json)
    kind = item.WhichOneof("value")
    if kind == "json":
        return json.loads(item.json)
    return None if kind in (None, "none") else getattr(item, kind)


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_wandb_file(path: str | Path) -> WandbFileRun:
    """Parse one `.wandb` file (see the module docstring); raises `WandbFileError` on foreign files."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    run = WandbFileRun()
    for payload in _payloads(path.read_bytes(), path):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group, run.job_type = r.run_id, r.project, r.run_group, r.job_type
            run.tags = list(r.tags)
            for item in r.config.update:
                run.config[_key(item)] = _value(item)
        elif kind == "config":
            for item in record.config.update:
                run.config[_key(item)] = _value(item)
        elif kind == "history":
            run.rows.append({_key(item): _value(item) for item in record.history.item})
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = _value(item)
    run.config = {k: v for k, v in run.config.items() if not k.startswith("_")}
    return run


def merge(parts: list[WandbFileRun]) -> WandbFileRun:
    """One run from the files of its attempts (oldest first): later config, rows and summary win."""
    merged = WandbFileRun()
    for part in parts:
        merged.run_id, merged.project = part.run_id or merged.run_id, part.project or merged.project
        merged.group, merged.job_type = part.group or merged.group, part.job_type or merged.job_type
        merged.tags = part.tags or merged.tags
        merged.config.update(part.config)
        merged.rows.extend(part.rows)
        merged.summary.update(part.summary)
    return merged


def offline_run_files(run_dir: Path) -> list[Path]:
    """The `.wandb` files under `run_dir/wandb/` (one per attempt), oldest first."""
    return sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"), key=lambda p: p.parent.name)
