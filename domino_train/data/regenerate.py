"""Stage 2, regenerate: replace every assistant turn with the target's own response, turn by turn.

Drafters accept well only on what the target itself says, so each conversation keeps its system and
user messages and the target answers each user message given the conversation so far (its own earlier
answers included), through its chat template.

Resumable: the prepared rows are cut into fixed shards of `shard_size` rows; a shard's output file
appears (atomically) only when all its rows are done, and a restarted run skips the shards that exist.
Each request's random stream is seeded from (seed, row id, turn), so a redone shard equals the shard an
uninterrupted run would have written. A restart with other settings or other prepared rows (their
digest is recorded in `settings.json`) is refused, or redone with `overwrite` (`freshness.py`).

Context rule: a turn whose prompt plus `max_new_tokens` exceeds the target's context ends the
conversation before that turn; a conversation whose first prompt is too long is dropped
(`prompt_too_long`). An empty response or a backend error ends the conversation the same way
(`empty_response`, `backend_error` when it happens on the first turn).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from domino_train.data.backends import Request
from domino_train.data.drops import counted_drops, nothing_kept
from domino_train.data.freshness import claim_folder, content_digest
from domino_train.data.shards import list_shards, read_shards, shard_path, write_json_atomic, write_jsonl_atomic


def request_seed(seed: int, row_id: str, turn: int) -> int:
    digest = hashlib.sha256(f"{seed}:{row_id}:{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    while chunk := list(islice(rows, size)):
        yield chunk


def regenerate_rows(
    backend: Any, rows: list[dict[str, Any]], seed: int, max_new_tokens: int
) -> tuple[list[dict[str, Any]], Counter]:
    """Regenerate one shard's rows; returns the kept rows and the counters of what happened."""
    stats: Counter = Counter(rows_in=len(rows))
    convs = [[m for m in r["conversations"] if m["role"] == "system"] for r in rows]
    users = [[m for m in r["conversations"] if m["role"] == "user"] for r in rows]
    reasons: list[list[str]] = [[] for _ in rows]
    ended = [""] * len(rows)
    for turn in range(max((len(u) for u in users), default=0)):
        active, local_lengths, requests = [], [], []
        for i, row in enumerate(rows):
            if ended[i] or turn >= len(users[i]):
                continue
            messages = convs[i] + [users[i][turn]]
            n = backend.prompt_tokens(messages)
            if n is not None and backend.max_context is not None and n + max_new_tokens > backend.max_context:
                ended[i] = "prompt_too_long"
                continue
            active.append(i)
            local_lengths.append(n)
            requests.append(Request(messages=messages, seed=request_seed(seed, row["id"], turn)))
        responses = backend.generate(requests)
        for i, n, resp in zip(active, local_lengths, responses, strict=True):
            if resp.error is not None or not resp.text.strip():
                ended[i] = "backend_error" if resp.error is not None else "empty_response"
                continue
            if n is not None and resp.prompt_tokens is not None and resp.prompt_tokens != n:
                stats["prompts_rendered_otherwise"] += 1
            convs[i] += [users[i][turn], {"role": "assistant", "content": resp.text}]
            reasons[i].append(resp.finish_reason)
            stats["output_tokens"] += resp.num_tokens
            stats["turns"] += 1
    kept = []
    for i, row in enumerate(rows):
        if not reasons[i]:
            stats[f"dropped_{ended[i]}"] += 1
            continue
        if ended[i]:
            stats[f"cut_{ended[i]}"] += 1
        stats["truncated_responses"] += reasons[i].count("length")
        kept.append({"id": row["id"], "conversations": convs[i], "finish_reasons": reasons[i]})
    stats["rows_out"] = len(kept)
    return kept, stats


def regenerate(
    backend: Any,
    in_dir: str | Path,
    out_dir: str | Path,
    settings: dict[str, Any],
    max_new_tokens: int,
    seed: int = 0,
    shard_size: int = 64,
    limit: int | None = None,
    overwrite: bool = False,
    dependents: Sequence[Path] = (),
    check_template: bool = True,
) -> dict[str, Any]:
    """Regenerate the prepared rows of `in_dir` into `out_dir` shards; resumes; returns the summary.

    `settings` (target, sampling, backend, ...) and the digest of the prepared rows are recorded in
    `out_dir/settings.json`; resuming into a folder written with other settings or from other rows is
    refused, since mixing them would corrupt the set silently; `overwrite` redoes it instead (removing the
    `dependents`, the later stages' folders made from it). A run that keeps no row ends with a ValueError
    naming the reason (the empty shards are removed, so that a rerun redoes them). With `check_template`, a
    backend that reports prompt lengths other than the target's chat template gives (a server rendering
    with another template or other template arguments) stops the run before its first shard is written:
    a drafter trained on those answers would follow text that decoding never shows it.
    """
    in_dir, out_dir = Path(in_dir), Path(out_dir)
    settings = {
        **settings,
        "input_sha256": content_digest(in_dir),
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "shard_size": shard_size,
        "limit": limit,
    }
    claim_folder(out_dir, settings, overwrite, dependents)
    rows, total = _prepared_rows(in_dir, limit)
    totals: Counter = Counter()
    start = time.perf_counter()
    bar = tqdm(desc="regenerate", unit=" rows", total=total)
    for k, chunk in enumerate(_chunks(rows, shard_size)):
        stats, resumed = _shard(backend, chunk, shard_path(out_dir, k), seed, max_new_tokens, check_template)
        totals.update(stats)
        bar.update(len(chunk))
        if not resumed:
            bar.set_postfix(tok_s=f"{stats['output_tokens'] / max(stats['seconds'], 1e-9):.1f}")
    bar.close()
    summary = dict(sorted(totals.items()))
    summary["output_tokens_per_s"] = round(totals["output_tokens"] / max(totals["seconds"], 1e-9), 2)
    summary["wall_seconds_this_run"] = round(time.perf_counter() - start, 3)
    write_json_atomic(out_dir / "summary.json", summary)
    if not totals["rows_out"]:
        for shard in list_shards(out_dir):
            shard.unlink()
            shard.with_suffix(".stats.json").unlink(missing_ok=True)
        raise nothing_kept("regenerate", counted_drops(totals))
    return summary


def _prepared_rows(in_dir: Path, limit: int | None) -> tuple[Iterator[dict[str, Any]], int | None]:
    """The prepared rows to regenerate (the first `limit`), and how many there are where known."""
    rows = read_shards(in_dir)
    if limit is not None:
        rows = islice(rows, limit)
    prepared = in_dir / "summary.json"
    known = [
        n for n in (json.loads(prepared.read_text())["kept"] if prepared.is_file() else None, limit) if n is not None
    ]
    return iter(rows), min(known) if known else None


def _shard(
    backend: Any, chunk: list[dict[str, Any]], out: Path, seed: int, max_new_tokens: int, check_template: bool
) -> tuple[Counter | dict[str, Any], bool]:
    """Shard `out` regenerated from `chunk`, or read back where an earlier run finished it: its counters
    (written beside it, `.stats.json`) and whether it was read back."""
    stats_file = out.with_suffix(".stats.json")
    if out.is_file() and stats_file.is_file():
        return json.loads(stats_file.read_text()), True
    shard_start = time.perf_counter()
    kept, stats = regenerate_rows(backend, chunk, seed, max_new_tokens)
    if check_template and stats["prompts_rendered_otherwise"]:
        raise ValueError(
            f"the backend rendered {stats['prompts_rendered_otherwise']} of {stats['turns']} prompts to another "
            "length than the target's chat template: serve the target with its own template and pass its "
            "target.chat_template_kwargs, or set regenerate.check_template=false if the server counts prompt "
            "tokens its own way"
        )
    stats["seconds"] = round(time.perf_counter() - shard_start, 3)
    write_json_atomic(stats_file, dict(stats))
    write_jsonl_atomic(out, kept)
    return stats, False
