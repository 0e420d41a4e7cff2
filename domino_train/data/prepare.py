"""Stage 1, prepare: sources -> normalised, de-duplicated, filtered conversations in JSONL shards.

Rules, applied in this order to every record: parse (`malformed_json`, `not_utf8`, `truncated`), normalise
(`schema.normalize`: `not_an_object`, `no_messages`, `unknown_role`, ...), drop rows longer than
`max_chars` characters in total (`too_long`), keep at most `max_user_turns` user turns (later turns are
cut, not the row), drop exact duplicates of an earlier row (`duplicate`), leave out the first `skip`
rows that pass all of these (`skipped`: another slice of the same source, e.g. a held-out one), keep at
most `limit`. Every drop is counted by reason in `summary.json`; nothing is dropped silently, and the
first `SHOWN_PER_REASON` dropped rows of each reason (but `skipped`) are named by where they are
(`where`: `file:line` for local files). A stage that keeps no row ends with one line naming the most
frequent reason and its fix (`drops.py`). Output replaces the folder atomically.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from domino_train.data.drops import Drops, nothing_kept
from domino_train.data.freshness import replace_folder
from domino_train.data.schema import MalformedRow, content_hash, normalize
from domino_train.data.shards import shard_path, write_json_atomic, write_jsonl_atomic
from domino_train.data.sources import Source


def cut_user_turns(row: dict[str, Any], max_user_turns: int) -> dict[str, Any]:
    """Keep the conversation up to (excluding) its (max_user_turns + 1)-th user message."""
    seen, out = 0, []
    for m in row["conversations"]:
        if m["role"] == "user":
            seen += 1
            if seen > max_user_turns:
                break
        out.append(m)
    return {**row, "conversations": out}


def prepare(
    sources: dict[str, Source],
    out_dir: str | Path,
    max_chars: int = 32_000,
    max_user_turns: int | None = None,
    shard_size: int = 10_000,
    overwrite: bool = False,
    dependents: Sequence[Path] = (),
) -> dict[str, Any]:
    """Write `out_dir/shard-*.jsonl` and `out_dir/summary.json`; returns the summary.

    Rows that differ from the folder's present ones never replace them under `dependents` (the later
    stages' folders made from them) unless `overwrite`, which removes those (`freshness.replace_folder`)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-"))
    seen: set[str] = set()  # content hashes of every row so far, across sources
    summary: dict[str, Any] = {"sources": {}, "kept": 0, "dropped": 0}
    drops: dict[str, Drops] = {}
    shards = _Shards(tmp, shard_size)
    try:
        for name, source in sources.items():
            kept, drops[name], cuts = _prepare_source(name, source, seen, shards, max_chars, max_user_turns)
            summary["sources"][name] = _source_summary(name, kept, drops[name], cuts)
            summary["kept"] += kept
            summary["dropped"] += sum(drops[name].counts.values())
        if not summary["kept"]:
            name = max(drops, key=lambda n: drops[n].counts.total())  # the source that dropped most
            raise nothing_kept(f"prepare (source {name!r})", drops[name], source=name)
        shards.flush()
        write_json_atomic(tmp / "summary.json", summary)
        replace_folder(tmp, out_dir, overwrite, dependents)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary


class _Shards:
    """Kept rows, written to `folder` as numbered JSONL shards of `shard_size` rows (the last one shorter)."""

    def __init__(self, folder: Path, shard_size: int) -> None:
        self.folder, self.shard_size = folder, shard_size
        self.buffer: list[dict[str, Any]] = []
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.shard_size:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            write_jsonl_atomic(shard_path(self.folder, self.count), self.buffer)
            self.count, self.buffer = self.count + 1, []


def _prepare_source(
    name: str,
    source: Source,
    seen: set[str],
    shards: _Shards,
    max_chars: int,
    max_user_turns: int | None,
) -> tuple[int, Drops, Counter]:
    """One source's records through the rules (module docstring): (rows kept, drops, cut parts)."""
    kept, passed, cuts, drops = 0, 0, Counter(), Drops()
    drop = drops.add
    bar = tqdm(desc=f"prepare {name}", unit=" rows", total=source.limit)
    for i, (at, raw) in enumerate(source.records()):
        if source.limit is not None and kept >= source.limit:
            break
        try:
            if isinstance(raw, MalformedRow):
                raise raw
            row = normalize(raw, f"{name}-{i}", source.prompt_fields, source.response_field, cuts)
        except MalformedRow as e:
            drop(e.reason, at, e.detail)
            continue
        row["id"] = f"{name}/{row['id']}"
        if sum(len(m["content"]) for m in row["conversations"]) > max_chars:
            drop("too_long", at, f"over max_chars={max_chars}")
            continue
        if max_user_turns is not None:
            row = cut_user_turns(row, max_user_turns)
        key = content_hash(row)
        if key in seen:
            drop("duplicate", at)
            continue
        seen.add(key)
        if passed < source.skip:  # an earlier slice of this source (kept out of the dedup too)
            passed += 1
            drop("skipped")  # not a fault: not named
            continue
        shards.add(row)
        kept += 1
        bar.update()
    bar.close()
    return kept, drops, cuts


def _source_summary(name: str, kept: int, drops: Drops, cuts: Counter) -> dict[str, Any]:
    """A source's entry of `summary.json`, also printed in one line."""
    dropped, where = drops.counts, drops.where
    entry: dict[str, Any] = {"kept": kept, "dropped": dict(sorted(dropped.items()))}
    if where:
        entry["where"] = dict(sorted(where.items()))
    if cuts:
        entry["cut"] = dict(sorted(cuts.items()))
    shown = "".join(f"; {reason} at {', '.join(at)}" for reason, at in sorted(where.items()))
    cut = f", cut {dict(sorted(cuts.items()))}" if cuts else ""
    print(f"prepare {name}: kept {kept}, dropped {sum(dropped.values())} {dict(sorted(dropped.items()))}{cut}{shown}")
    return entry
