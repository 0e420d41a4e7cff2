"""Decoding at concurrency above 1, as results: the levels a run decodes at, and per arm its throughput,
request latency and draft sizes.

An arm is a method at a concurrency (`Record.arm`: `domino`, `domino@4`). At concurrency 1 a record's own
times are its request's; above 1 the records of one batched run (a method over a set's turn,
`inference.eval.batched_loop`) share one wall-clock interval, so throughput = the arm's output tokens /
the sum of its batched runs' wall times, and a request's latency is its own prefill + decode time (from
the start of its prefill to its last token; the time it waited for a free row is not included).

Decode throughput leaves the prefills out: the tokens after each request's first (which its prefill
chose) over the batched runs' wall time minus their prefill seconds (at concurrency 1: over the requests'
decode times). Prefill is the same work for every method, and on long prompts it dominates the wall time:
40 validation prompts of up to 3,498 tokens at concurrency 8 spent most of it in the prefills of the
longest, so throughput compared the methods' prefills more than their speculation.
"""

from __future__ import annotations

from typing import Any

from omegaconf import ListConfig

from inference.eval.records import Record


def concurrency_levels(value: Any) -> list[int]:
    """`concurrency` as the sorted levels a run decodes at (an int or a list of them), each >= 1."""
    levels = list(value) if isinstance(value, list | tuple | ListConfig) else [value]
    if not levels or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in levels):
        raise ValueError(f"concurrency must be an integer >= 1 or a list of them (e.g. [1,2,4,8]), got {value!r}")
    return sorted(set(levels))


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def serving_metrics(done: list[Record]) -> dict[str, Any]:
    """Throughput (output tokens / wall time), decode throughput (module doc; None for batched runs recorded
    without their prefill seconds), request latency (median, 90th percentile) and the mean draft size of one
    arm's finished records on one set."""
    tokens = sum(len(r.tokens) for r in done)
    batches = {r.batch["id"]: r.batch for r in done if r.batch}
    wall = sum(b["wall_s"] for b in batches.values())
    wall += sum(r.stats.prefill_s + r.stats.decode_s for r in done if not r.batch)
    decoding = None
    if all("prefill_s" in b for b in batches.values()):
        decoding = sum(b["wall_s"] - b["prefill_s"] for b in batches.values())
        decoding += sum(r.stats.decode_s for r in done if not r.batch)
    latency = [r.stats.prefill_s + r.stats.decode_s for r in done]
    sizes = [n for r in done for n in r.stats.draft_sizes]
    return {
        "concurrency": done[0].concurrency if done else None,
        "throughput_tok_s": tokens / wall if wall > 0 else None,
        "decode_tok_s": (tokens - len(done)) / decoding if decoding else None,
        "latency_s_p50": _quantile(latency, 0.5),
        "latency_s_p90": _quantile(latency, 0.9),
        "mean_draft_size": sum(sizes) / len(sizes) if sizes else None,
    }


def reference_arm(arm: str, arms: list[str]) -> str | None:
    """The `ar` arm an arm's outputs are checked against: batch-1 `ar` when the run has it, else `ar` at the
    arm's concurrency; None for batch-1 `ar` itself (or when the run has no `ar`)."""
    if arm == "ar":
        return None
    if "ar" in arms:
        return "ar"
    level = arm.partition("@")[2]
    same = f"ar@{level}"
    return same if level and same in arms and same != arm else None


def speedup_reference(arm: str) -> str:
    """The arm a speedup is measured against: `ar` at the same concurrency."""
    level = arm.partition("@")[2]
    return f"ar@{level}" if level else "ar"


def by_concurrency(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """{dataset: {method: {concurrency: {throughput_tok_s, speedup, tau, latency, draft size}}}} from the
    per-arm summaries (`inference.eval.results.summarize`)."""
    keys = ("throughput_tok_s", "speedup", "decode_tok_s", "decode_speedup", "tau", "latency_s_p50", "latency_s_p90")
    keys += ("mean_draft_size",)
    table: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for dataset, arms in results.items():
        for arm, s in arms.items():
            method, _, level = arm.partition("@")  # from the name: an arm whose prompts were all skipped has no records
            table.setdefault(dataset, {}).setdefault(method, {})[int(level or 1)] = {k: s[k] for k in keys}
    return table


def concurrency_section(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """results.md's table of arms above concurrency 1 and their batch-1 counterparts (none without them)."""
    if not any("@" in arm for arms in results.values() for arm in arms):
        return []
    lines = [
        "",
        "Throughput = output tokens / wall time of the batched runs; decode = the tokens after each request's "
        "first / that time less the prefills; speedups over `ar` at the same concurrency; latency = a request's "
        "prefill + decode (its wait for a free row excluded).",
        "",
        "| dataset | method | concurrency | throughput tok/s | speedup | decode tok/s | decode speedup | tau "
        "| latency p50 s | latency p90 s | mean draft size |",
        "|---" * 11 + "|",
    ]
    for dataset, by_method in by_concurrency(results).items():
        for method, by_level in by_method.items():
            for level, m in sorted(by_level.items()):
                cells = [
                    _cell(m["throughput_tok_s"], ".1f"),
                    _cell(m["speedup"], ".2f", "x"),
                    _cell(m["decode_tok_s"], ".1f"),
                    _cell(m["decode_speedup"], ".2f", "x"),
                    _cell(m["tau"], ".2f"),
                    _cell(m["latency_s_p50"], ".2f"),
                    _cell(m["latency_s_p90"], ".2f"),
                    _cell(m["mean_draft_size"], ".1f"),
                ]
                lines.append(f"| {dataset} | {method} | {level} | " + " | ".join(cells) + " |")
    return lines


def _cell(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"
