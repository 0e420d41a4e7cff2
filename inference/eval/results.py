"""Turn evaluation records into the papers' numbers and the files `domino-decode` writes.

Per dataset and arm (a method at a concurrency: `domino`, `domino@4`): tau (tokens committed per verify
round, bonus included, SGLang's convention), speedup (at concurrency 1 AR decode time per output token /
the method's, same process and prompts; above 1 throughput over batched AR's), tokens/s, throughput and
request latency (`inference.eval.concurrency`), counts,
the acceptance-length histogram, stage timings and, at T = 0 with `ar` run, the divergence classes of
`inference.eval.divergence`: `own_argmax_violations` (committed tokens that are not the argmax of the
method's own verify logits), `divergences: {exact, numerical, algorithmic}` (generations; numerical only
where the replayed proof holds), `lossless` = no algorithmic generation (null when not checked), and, as
measurements, the run's `noise_floor` and the largest `ar` margin among the numerical divergences
(`rechecked`: how many flags of clause (c) were decoded again in a finer precision, and how many it
proved rounding: `inference.eval.recheck`). Time
per output token is decode time (everything after the first token) over output tokens, as in the DFlash /
DDTree harness; prefill is reported on its own.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from inference.decoding.stats import walk_rates
from inference.eval.concurrency import (
    by_concurrency,
    concurrency_section,
    reference_arm,
    serving_metrics,
    speedup_reference,
)
from inference.eval.divergence import ALGORITHMIC, DIVERGENCE_CLASSES, NUMERICAL, classify, counts_text
from inference.eval.figures import write_concurrency_plot, write_cost_plot, write_plot
from inference.eval.records import Record

STAGES = ("prefill", "decode", "draft", "verify", "commit")


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def noise_floor(records: list[Record]) -> float | None:
    """The run's noise floor: the largest noise measured on any of its prompts (None if none was)."""
    return max((r.noise for r in records if r.noise is not None), default=None)


def method_summary(records: list[Record], reference: list[Record] | None, floor: float | None = None) -> dict[str, Any]:
    """Metrics of one method on one dataset; `reference` = the `ar` records when outputs are compared,
    `floor` the run's noise floor (reported beside them)."""
    done = [r for r in records if not r.skipped]
    output_tokens = sum(len(r.tokens) for r in done)
    parts = sorted({k for r in done for k in r.stats.stage_seconds() if k not in STAGES})
    stages = {s: sum(r.stats.stage_seconds().get(s, 0.0) for r in done) for s in (*STAGES, *parts)}
    lengths = [n for r in done for n in r.stats.accept_lengths]
    sizes = Counter(n for r in done for n in r.stats.draft_sizes)
    logged = [
        (p, a)
        for r in done
        if r.stats.predicted
        for p, a in zip(r.stats.predicted, r.stats.accept_lengths, strict=True)
    ]
    rounds = len(lengths)
    histogram = Counter(lengths)
    split = stages["draft"] + stages["verify"] + stages["commit"] > 0  # ar has no stage split
    summary: dict[str, Any] = {
        "tau": sum(lengths) / rounds if rounds else None,
        "speedup": None,
        "decode_speedup": None,
        **serving_metrics(done),
        "tokens_per_s": output_tokens / stages["decode"] if stages["decode"] > 0 else None,
        "time_per_output_token_s": stages["decode"] / output_tokens if output_tokens else None,
        "num_prompts": len({r.prompt_id for r in done}),
        "num_generations": len(done),
        "num_output_tokens": output_tokens,
        "skipped_prompts": len({r.prompt_id for r in records if r.skipped}),  # a turn did not fit the context
        "lossless": None,
        "own_argmax_violations": sum(r.stats.own_argmax_violations for r in done),
        "divergences": None,
        "noise_floor": None,
        "max_numerical_gap": None,
        "rounds": rounds,
        "accept_length_histogram": [histogram.get(n, 0) for n in range(max(histogram, default=0) + 1)],
        # per round, where the decoder logged them: drafts verified and the tokens it expected to commit
        "draft_size_histogram": [sizes.get(n, 0) for n in range(max(sizes, default=-1) + 1)],
        "predicted_tokens_per_round": _mean([p for p, _ in logged]),
        # trees: how often the walk goes one deeper below an accepted main-path node / sibling node
        "accepted_after": walk_rates(r.stats for r in done),
        "realised_tokens_per_round": _mean([a for _, a in logged]),
        "stage_s": stages,
        "stage_ms_per_round": {
            s: 1e3 * stages[s] / rounds if rounds and split else None for s in ("draft", *parts, "verify", "commit")
        },
    }
    if reference is not None and (done or any(not r.skipped for r in reference)):  # else nothing to compare
        expected = {(r.prompt_id, r.turn): r.tokens for r in reference if not r.skipped}
        counts = dict.fromkeys(DIVERGENCE_CLASSES, 0)
        gaps = []
        for r in done:
            key = (r.prompt_id, r.turn)
            equal, violations = expected.get(key) == r.tokens, r.stats.own_argmax_violations
            kind = classify(r.divergence, equal, violations) if key in expected else ALGORITHMIC
            counts[kind] += 1
            if kind == NUMERICAL:
                gaps.append(r.divergence["ar_margin"])
        counts[ALGORITHMIC] += len(expected.keys() - {(r.prompt_id, r.turn) for r in done})  # missing ones
        summary["lossless"] = counts[ALGORITHMIC] == 0
        summary["divergences"] = counts
        summary["noise_floor"] = floor
        summary["max_numerical_gap"] = max(gaps, default=None)
        rechecks = [r.divergence["recheck"] for r in done if r.divergence and "recheck" in r.divergence]
        if rechecks:  # flags of clause (c) decoded again in a finer precision (`inference.eval.recheck`)
            cleared = sum(c["kind"] != ALGORITHMIC for c in rechecks)
            summary["rechecked"] = {"dtype": rechecks[0]["dtype"], "generations": len(rechecks), "cleared": cleared}
    return summary


def summarize(records: list[Record], check_lossless: bool) -> dict[str, dict[str, dict[str, Any]]]:
    """{dataset: {arm: metrics}} (an arm: a method at a concurrency, `Record.arm`). Speedups against `ar` at
    the same concurrency: at 1 by time per output token, above 1 by throughput. `lossless` when
    `check_lossless`, against `ar` (batch 1 where the run has it: `concurrency.reference_arm`)."""
    grouped: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        grouped[r.dataset][r.arm].append(r)
    floor = noise_floor(records)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for dataset, by_arm in grouped.items():
        results[dataset] = {}
        for arm, recs in by_arm.items():
            ref = reference_arm(arm, list(by_arm)) if check_lossless else None
            results[dataset][arm] = method_summary(recs, by_arm[ref] if ref else None, floor)
        for arm, summary in results[dataset].items():
            base = results[dataset].get(speedup_reference(arm), {})
            if "@" in arm:
                num, den = summary["throughput_tok_s"], base.get("throughput_tok_s")
            else:
                num, den = base.get("time_per_output_token_s"), summary["time_per_output_token_s"]
            summary["speedup"] = num / den if num and den else None
            num, den = summary["decode_tok_s"], base.get("decode_tok_s")
            summary["decode_speedup"] = num / den if num and den else None
    return results


def mean_over_datasets(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    methods = list(dict.fromkeys(m for by_method in results.values() for m in by_method))
    return {
        m: {
            k: _mean([d[m][k] for d in results.values() if m in d])
            for k in ("tau", "speedup", "tokens_per_s", "throughput_tok_s")
        }
        for m in methods
    }


def noise_floor_of(results: dict[str, dict[str, dict[str, Any]]]) -> float | None:
    """The noise floor the summaries were judged with (one per run)."""
    return next((s["noise_floor"] for d in results.values() for s in d.values() if s["noise_floor"] is not None), None)


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def markdown(results: dict[str, dict[str, dict[str, Any]]], header: str) -> str:
    """The papers' table (speedup / tau per dataset, and the mean), then the details per dataset."""
    datasets = list(results)
    means = mean_over_datasets(results)
    lines = [header, "", "| method | " + " | ".join(datasets) + " | mean |", "|---" * (len(datasets) + 2) + "|"]
    for method, mean in means.items():
        cells = [
            f"{_fmt(results[d][method]['speedup'], '.2f', 'x')} / {_fmt(results[d][method]['tau'], '.2f')}"
            if method in results[d]
            else "-"
            for d in datasets
        ]
        cells.append(f"{_fmt(mean['speedup'], '.2f', 'x')} / {_fmt(mean['tau'], '.2f')}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Cells: speedup / tau. Speedup = AR decode time per output token / the method's (same process, same "
        "prompts); tau = tokens committed per verify round, bonus included. Lossless (exact / numerical / "
        "algorithmic generations): yes when every committed token is the argmax of the method's own verify "
        "logits and every output that parts from ar's was replayed and proven a rounding tie: both sides "
        "chose their own argmax and the method's logits sit within rounding of ar's "
        f"(inference/eval/divergence.py; the run's noise floor, reported only: "
        f"{_fmt(noise_floor_of(results), '.3g')} logits).",
        "",
        "| dataset | method | tau | speedup | tok/s | prompts | output tokens | skipped | lossless "
        "| draft ms/round | verify ms/round | commit ms/round |",
        "|---" * 12 + "|",
    ]
    for d in datasets:
        for method, s in results[d].items():
            per_round = s["stage_ms_per_round"]
            lossless = _lossless_cell(s)
            lines.append(
                f"| {d} | {method} | {_fmt(s['tau'], '.2f')} | {_fmt(s['speedup'], '.2f', 'x')} "
                f"| {_fmt(s['tokens_per_s'], '.1f')} | {s['num_prompts']} | {s['num_output_tokens']} "
                f"| {s['skipped_prompts']} | {lossless} | {_fmt(per_round['draft'], '.2f')} "
                f"| {_fmt(per_round['verify'], '.2f')} | {_fmt(per_round['commit'], '.2f')} |"
            )
    return "\n".join(lines + _rounds_section(results) + concurrency_section(results)) + "\n"


def _lossless_cell(s: dict[str, Any]) -> str:
    """`yes (exact / numerical / algorithmic)`, `NO (...)`, or `-` when not checked (and why, when every
    prompt was skipped: nothing was compared)."""
    if s["lossless"] is None:
        skipped = s["skipped_prompts"] and not s["num_prompts"]
        return f"- (all {s['skipped_prompts']} prompts skipped)" if skipped else "-"
    violations = s.get("own_argmax_violations") or 0
    own = f", {violations} own-argmax violations" if violations else ""
    if again := s.get("rechecked"):
        own += f", {again['generations']} rechecked in {again['dtype']}: {again['cleared']} rounding"
    return f"{'yes' if s['lossless'] else 'NO'} ({counts_text(s['divergences'])}{own})"


def _rounds_section(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Per method with logged rounds: predicted against realised tokens per round, the draft sizes and, for
    trees, how often the walk went one deeper below an accepted main-path node and below a sibling."""
    rows = [
        f"| {d} | {m} | {s['predicted_tokens_per_round']:.2f} | {s['realised_tokens_per_round']:.2f} | "
        + ", ".join(f"{n}: {c}" for n, c in enumerate(s["draft_size_histogram"]) if c)
        + f" | {_walk_cell(s['accepted_after'], 'main')} | {_walk_cell(s['accepted_after'], 'sibling')} |"
        for d, by_method in results.items()
        for m, s in by_method.items()
        if s.get("predicted_tokens_per_round") is not None
    ]
    if not rows:
        return []
    header = (
        "| dataset | method | predicted tokens / round | realised | draft sizes (size: rounds) "
        "| accepted after main (steps) | accepted after sibling (steps) |"
    )
    return ["", header, "|---" * 7 + "|", *rows]


def _walk_cell(rates: dict[str, Any], kind: str) -> str:
    return "-" if rates[kind] is None else f"{rates[kind]:.0%} ({rates[f'{kind}_steps']})"


def generation_rows(records: list[Record]) -> list[dict[str, Any]]:
    """One JSON object per generation (skipped ones included, with their reason)."""
    rows = []
    for r in records:
        row = r.to_row()
        row.pop("stats", None)  # records.jsonl keeps them; stage_s has the same times
        rows.append(row)
    return rows


def write_outputs(out_dir: Path, records: list[Record], check_lossless: bool, meta: dict[str, Any]) -> dict[str, Any]:
    """results.json, results.md, generations.jsonl, plot.png and, for cost-aware runs, costs.png (the
    plots when matplotlib is there) in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = summarize(records, check_lossless)
    with open(out_dir / "generations.jsonl", "w") as f:
        for row in generation_rows(records):
            f.write(json.dumps(row) + "\n")
    mean = mean_over_datasets(results)
    plotted = write_plot(out_dir / "plot.png", results, list(mean))
    report = {**meta, "results": results, "mean": mean, "plot": "plot.png" if plotted else None}
    levels = by_concurrency(results)
    if any(len(by_level) > 1 or 1 not in by_level for d in levels.values() for by_level in d.values()):
        report["concurrency"] = levels
        if write_concurrency_plot(out_dir / "concurrency.png", levels):
            report["concurrency_plot"] = "concurrency.png"
    if meta.get("cost_model") and write_cost_plot(out_dir / "costs.png", meta["cost_model"]):
        report["cost_plot"] = "costs.png"
    (out_dir / "results.json").write_text(json.dumps(report, indent=2))
    header = "# domino-decode\n\n" + " · ".join(f"{k}: {v}" for k, v in meta.items() if not isinstance(v, dict))
    (out_dir / "results.md").write_text(markdown(results, header))
    return report


class ResultsFileError(ValueError):
    """A file given as a `domino-decode` results.json that is not one."""


def read_results(path: str | Path) -> dict[str, Any]:
    """A `results.json` that `write_outputs` wrote, checked for what its readers use (`results` and `mean`);
    refused with `ResultsFileError` naming the problem: missing, not JSON, or another kind of file."""
    fix = "pass the results.json that domino-decode wrote"
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ResultsFileError(f"{path} does not exist: {fix}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsFileError(f"{path} is not JSON ({e}): {fix}") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("results"), dict)
        or not isinstance(data.get("mean"), dict)
    ):
        raise ResultsFileError(f"{path}: not a domino-decode results.json (needs 'results' and 'mean'): {fix}")
    return data
