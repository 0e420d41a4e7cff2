"""Stage 8: speculation at concurrency above 1 on the GPU (`BatchedDecoder`, budgets across the batch).

16 prompts (the decoding stage's 4, each asked for 4 audiences), 128 new tokens, greedy, decoded by `ar`
and the cost-aware arms (`domino` with `chain.window=auto`, `ddtree` and `dominotree` with
`tree.budget=auto`) at concurrency 1, 4 and 16, every level one continuous batch of the 16 prompts. Per
method and level: throughput (output tokens / wall time), speedup over `ar` at the same level, tau, the mean
draft size, the trees' accepted-after-main and accepted-after-sibling rates (how often the walk goes one
deeper below an accepted first child, and below an accepted sibling), and how many outputs equal batch-1
`ar`'s. On a GPU the verify is nearly flat in its width, so the arms should keep wide drafts far longer
than on a CPU and the sibling rate decides how much DominoTree gains over DDTree per row. A committed token
that is not its own verify argmax fails the stage; outputs that part from batch-1 `ar`'s are counted (bf16
rounding differs between batch sizes). Dry run: the tiny target with random drafters at concurrency 1
and 2, where every output must equal batch-1 `ar`'s (fp32).
"""

from __future__ import annotations

import time

import torch

from checks.context import CheckFailed, Context, table
from checks.decoding import PROMPTS, prompt_ids, reference_setup
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.batched import BatchedDecoder
from inference.decoding.budget import AUTO
from inference.decoding.stats import walk_rates

AUDIENCES = ("a child", "a student", "an engineer", "a poet")
METHODS = {"ar": None, "domino": "domino", "ddtree": "dflash", "dominotree": "domino"}  # method -> drafter
GPU_LEVELS, DRY_LEVELS = (1, 4, 16), (1, 2)
GPU_MAX_BUDGET, DRY_MAX_BUDGET = 64, 4
HEADER = ["method", "concurrency", "tok/s", "speedup vs ar", "tau", "mean draft", "after main", "after sibling"]
HEADER += ["equal to ar"]


def _decoder(method: str, target, drafters: dict, max_budget: int):
    if method == "ar":
        return build_decoder("ar", target, None, DecodeOptions())
    options = DecodeOptions(chain_window=AUTO if method == "domino" else None)
    tree = TreeOptions(budget=AUTO, max_budget=max_budget) if method != "domino" else None
    return build_decoder(method, target, drafters[METHODS[method]], options, tree)


@torch.inference_mode()
def run(ctx: Context) -> tuple[dict, list]:
    target, drafters, prompts, new_tokens = reference_setup(ctx)
    if not ctx.dry_run:
        prompts = [prompt_ids(target, f"{p} Answer for {who}.") for p in PROMPTS for who in AUDIENCES]
    levels, max_budget = (DRY_LEVELS, DRY_MAX_BUDGET) if ctx.dry_run else (GPU_LEVELS, GPU_MAX_BUDGET)
    ar = _decoder("ar", target, drafters, max_budget)
    alone = [g.tokens for g in BatchedDecoder(ar, 1).generate(prompts, new_tokens)]
    results: dict = {"prompts": len(prompts), "new_tokens": new_tokens, "methods": {}}
    rows, violations, unequal = [], {}, {}
    for method in METHODS:
        decoder = _decoder(method, target, drafters, max_budget)
        for level in levels:
            batched = BatchedDecoder(decoder, level)
            batched.generate(prompts[:level], 8)  # warm-up: kernels, the batch verify curve, graphs
            if target.device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            gens = batched.generate(prompts, new_tokens)
            if target.device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            tokens = sum(len(g.tokens) for g in gens)
            rounds = [k for g in gens for k in g.stats.accept_lengths]
            sizes = [n for g in gens for n in g.stats.draft_sizes]
            walk = walk_rates(g.stats for g in gens)
            equal = sum(g.tokens == a for g, a in zip(gens, alone, strict=True))
            if bad := sum(g.stats.own_argmax_violations for g in gens):
                violations[f"{method}@{level}"] = bad
            if ctx.dry_run and equal < len(prompts):
                unequal[f"{method}@{level}"] = len(prompts) - equal
            stats = {
                "concurrency": level,
                "tokens_per_s": tokens / seconds,
                "tau": sum(rounds) / len(rounds),
                "mean_draft_size": sum(sizes) / len(sizes) if sizes else None,
                "accepted_after": walk,
                "equal_to_ar": equal,
            }
            results["methods"].setdefault(method, []).append(stats)
    for method, by_level in results["methods"].items():
        for stats, ar in zip(by_level, results["methods"]["ar"], strict=True):
            stats["speedup_vs_ar"] = stats["tokens_per_s"] / ar["tokens_per_s"]
            walk = stats["accepted_after"]
            cells = [stats["tokens_per_s"], stats["speedup_vs_ar"], stats["tau"], stats["mean_draft_size"]]
            cells += [walk["main"], walk["sibling"]]
            cells = ["-" if c is None else c for c in cells]
            rows.append([method, str(stats["concurrency"]), *cells, f"{stats['equal_to_ar']}/{len(prompts)}"])
    note = "dry run, no timing claimed" if ctx.dry_run else f"SmolLM2-135M, {len(prompts)} prompts, greedy"
    tables = [table(f"{note}; one continuous batch per level", HEADER, rows)]
    if violations or unequal:
        raise CheckFailed(f"own-argmax violations {violations}; outputs unlike batch-1 ar {unequal}", results, tables)
    return results, tables
