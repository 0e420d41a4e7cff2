"""The cost model of a decoding run: the verify curves of its cost-aware decoders, timed before the run,
and what each reports of its costs and acceptance at the end (results.json's `cost_model`)."""

from __future__ import annotations

from typing import Any

from inference.decoding.speculative import SpeculativeDecoder
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.targets.adapter import TargetModel


def measure_costs(
    decoders: dict[str, Any], target: TargetModel, benchmarks: dict[str, list[BenchmarkPrompt]]
) -> dict[str, Any]:
    """Time the verify curve of every cost-aware decoder after the run's median first-turn prompt length."""
    aware = {m: d for m, d in decoders.items() if isinstance(d, SpeculativeDecoder) and d.cost_aware}
    if not aware:
        return {}
    lengths = sorted(
        len(target.chat_ids([{"role": "user", "content": p.turns[0]}])) for ps in benchmarks.values() for p in ps
    )
    prompt_tokens = lengths[len(lengths) // 2] if lengths else 64
    return {m: d.measure_costs(prompt_tokens).to_dict() for m, d in aware.items()}


def cost_report(decoders: dict[str, Any], verify_curves: dict[str, Any]) -> dict[str, Any]:
    """Per cost-aware method: its verify curve, its drafting costs and its acceptance map at the run's end."""
    report = {}
    for m, curve in verify_curves.items():
        d = decoders[m]
        report[m] = {"verify_curve": curve, "draft_fixed_s": d.fixed_s.value(), "acceptance": d.acceptance.to_dict()}
        if getattr(d, "step_s", None) is not None:
            report[m]["draft_step_s"] = d.step_s.value()
        if d.batch_curves:  # concurrency -> the batch verify curve over total tokens (`batch_budget.py`)
            report[m]["batch_verify_curves"] = {n: c.to_dict() for n, c in sorted(d.batch_curves.items())}
        if d.batch_costs:  # concurrency -> the forwards the batched rounds timed
            report[m]["batch_timed_verify"] = {n: c.to_dict() for n, c in sorted(d.batch_costs.items())}
        if d.batch_caps:  # concurrency -> the cap on a row's drafts and every cap it held (`draft_cap.py`)
            report[m]["batch_draft_caps"] = {n: c.to_dict() for n, c in sorted(d.batch_caps.items())}
    return report
