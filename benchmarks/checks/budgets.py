"""Stage 6: the tree budget on the GPU: fixed budgets against `tree.budget=auto`, for DDTree and DominoTree.

On a GPU the verify forward is nearly flat in its width, so the best fixed budget sits far above the
CPU's (the DDTree / DominoTree papers sweep 16..256). Each tree method decodes the decoding stage's
prompts with budgets 16 / 32 / 64 / 128 / 256 and with `auto` (at most 256 nodes, chosen per round from
the verify curve measured at warm-up and the running acceptance calibration); the table gives tok/s,
the speedup over `ar`, tau, ms per round, the mean verified tree, and the predicted against realised
tokens per round. Every output is checked against `ar`'s as the decoding stage does (own argmax, replayed
proofs): an algorithmic divergence fails the stage. Dry run: the tiny target with random drafters on the
CPU, budgets 2 / 4 and auto up to 4 (no timing claimed).
"""

from __future__ import annotations

import torch

from checks.context import CheckFailed, Context, table
from checks.decoding import divergence_counts, noise_floor, reference_setup, summarise, timed_runs
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.budget import AUTO
from inference.eval.divergence import ALGORITHMIC

TREE_METHODS = {"ddtree": "dflash", "dominotree": "domino"}  # method -> the drafter it runs
GPU_BUDGETS, GPU_MAX_BUDGET = [16, 32, 64, 128, 256], 256
DRY_BUDGETS, DRY_MAX_BUDGET = [2, 4], 4
HEADER = ["method", "budget", "tok/s", "speedup vs ar", "tau", "ms/round", "mean tree", "predicted", "e/n/a"]


def _per_round(runs: list, stats: dict, ar_s: float) -> dict:
    """Rates and the per-round log of a budget's generations: the mean verified tree and the mean predicted
    tokens per round (realised: tau)."""
    sizes = [n for r in runs for n in r.stats.draft_sizes]
    predicted = [p for r in runs for p in r.stats.predicted]
    seconds = stats["decode_s"]
    return {
        "speedup_vs_ar": ar_s / seconds if seconds else None,
        "tokens_per_s": stats["output_tokens"] / seconds if seconds else None,
        "ms_per_round": 1e3 * seconds / stats["rounds"] if stats["rounds"] else None,
        "mean_tree": sum(sizes) / len(sizes) if sizes else None,
        "predicted_per_round": sum(predicted) / len(predicted) if predicted else None,
    }


@torch.inference_mode()
def run(ctx: Context) -> tuple[dict, list]:
    target, drafters, prompts, new_tokens = reference_setup(ctx)
    budgets, max_budget = (DRY_BUDGETS, DRY_MAX_BUDGET) if ctx.dry_run else (GPU_BUDGETS, GPU_MAX_BUDGET)
    ar = build_decoder("ar", target, None, DecodeOptions())
    ar_runs = timed_runs(ar, prompts, new_tokens)
    ar_outputs, ar_stats = [r.tokens for r in ar_runs], summarise(ar_runs)
    floor = noise_floor(target, prompts, ar_outputs, max_budget + 1)
    results: dict = {"ar": ar_stats, "noise_floor": floor, "methods": {}}
    rows, bugs = [], {}
    for method, drafter_key in TREE_METHODS.items():
        for budget in [*budgets, AUTO]:
            tree = TreeOptions(budget=budget, max_budget=max_budget)
            decoder = build_decoder(method, target, drafters[drafter_key], DecodeOptions(), tree)
            runs = timed_runs(decoder, prompts, new_tokens)
            counts, _, found = divergence_counts(decoder, ar, prompts, ar_outputs, runs, new_tokens)
            if found:
                bugs[f"{method} budget {budget}"] = found
            stats = summarise(runs)
            stats.update(budget=budget, divergences=counts, **_per_round(runs, stats, ar_stats["decode_s"]))
            results["methods"].setdefault(method, []).append(stats)
            figures = ("tokens_per_s", "speedup_vs_ar", "tau", "ms_per_round", "mean_tree", "predicted_per_round")
            rows.append([method, str(budget), *(stats[k] or "" for k in figures), "/".join(map(str, counts.values()))])
    note = "dry run, no timing claimed" if ctx.dry_run else f"SmolLM2-135M, {len(prompts)} prompts, greedy"
    ar_rate = ar_stats["output_tokens"] / ar_stats["decode_s"]
    tables = [table(f"{note}; ar {ar_rate:.1f} tok/s; realised tokens per round = tau", HEADER, rows)]
    if bugs:
        raise CheckFailed(f"{ALGORITHMIC} divergences from ar's outputs (run: prompt: where): {bugs}", results, tables)
    return results, tables
