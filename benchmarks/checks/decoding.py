"""Stage 5: real decoding on the GPU: SmolLM2-135M with the shipped reference drafters, every method.

Needs `pretrained/smollm2-135m-domino` and `pretrained/smollm2-135m-dflash` in the checkout (skipped
without them). Each method decodes the same prompts greedily after one warm-up generation (CUDA graph
capture, kernel selection); `dflash` and `ddtree` run the DFlash drafter, `domino` and `dominotree` the
Domino drafter. Lossless: every method's tokens equal `ar`'s, prompt for prompt (a mismatch fails the
stage and names the first differing position). Speedup: `ar`'s decode time over the method's, summed over
the prompts; tau: tokens committed per verify round. Dry run: the tiny Qwen3 target with random drafters
on the CPU in fp32 (lossless is still checked; speedups are not claimed).
"""

from __future__ import annotations

import torch
from gpu_check import ROOT
from tree_build import drafter_for

from checks.context import CheckFailed, Context, StageSkipped, table
from inference import DominoDrafter, load_target
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.api import prompt_ids

DRAFTERS = {
    "domino": ROOT / "pretrained" / "smollm2-135m-domino",
    "dflash": ROOT / "pretrained" / "smollm2-135m-dflash",
}
METHODS = {"ar": None, "dflash": "dflash", "domino": "domino", "ddtree": "dflash", "dominotree": "domino"}
PROMPTS = [
    "Explain in three sentences why the sky is blue.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "List five countries in Europe and their capitals.",
    "What is the difference between a list and a tuple in Python?",
]


def _first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@torch.inference_mode()
def run(ctx: Context) -> tuple[dict, list]:
    if ctx.dry_run:
        target = load_target("tiny-qwen3", device="cpu")
        drafters = {  # random drafters of the tiny target's shape, drafting from its embedding and lm_head
            kind: drafter_for("tiny-qwen3", "cpu", torch.float32, 2, head).bind_target(
                target.embed_tokens, target.lm_head
            )
            for kind, head in (("domino", "domino"), ("dflash", None))
        }
        prompts, new_tokens = [[1, 2, 3, 4, 5, 6, 7, 8], [40, 41, 42, 43]], 12
    else:
        missing = [str(p.relative_to(ROOT)) for p in DRAFTERS.values() if not (p / "config.json").is_file()]
        if missing:
            raise StageSkipped(f"no pretrained drafters ({', '.join(missing)} missing in the checkout)")
        target = load_target("smollm2", device=ctx.device)
        drafters = {k: DominoDrafter.from_pretrained(p, target=target).eval() for k, p in DRAFTERS.items()}
        prompts, new_tokens = [prompt_ids(target, p) for p in PROMPTS], 128
    outputs: dict[str, list[list[int]]] = {}
    stats: dict[str, dict] = {}
    for method, drafter_key in METHODS.items():
        drafter = drafters[drafter_key] if drafter_key else None
        decoder = build_decoder(method, target, drafter, DecodeOptions(), TreeOptions())
        decoder.generate(prompts[0], 8)  # warm-up: graph capture, kernel choice, allocator
        runs = [decoder.generate(p, new_tokens) for p in prompts]
        outputs[method] = [r.tokens for r in runs]
        taus = [r.stats.tau for r in runs if r.stats.tau is not None]
        stats[method] = {
            "decode_s": sum(r.stats.decode_s for r in runs),
            "output_tokens": sum(len(r.tokens) for r in runs),
            "tau": sum(taus) / len(taus) if taus else None,
        }
    ar_s = stats["ar"]["decode_s"]
    diffs = {}
    for method in METHODS:
        firsts = [_first_difference(a, b) for a, b in zip(outputs["ar"], outputs[method], strict=True)]
        stats[method]["lossless"] = all(f is None for f in firsts)
        stats[method]["speedup_vs_ar"] = ar_s / stats[method]["decode_s"] if stats[method]["decode_s"] else None
        if not stats[method]["lossless"]:
            diffs[method] = {i: f for i, f in enumerate(firsts) if f is not None}
    rows = [
        [m, s["lossless"], s["output_tokens"], s["tau"] or "", s["decode_s"], s["speedup_vs_ar"] or ""]
        for m, s in stats.items()
    ]
    note = "dry run, no speedup claimed" if ctx.dry_run else f"SmolLM2-135M, {len(prompts)} prompts, greedy"
    results = {"target": target.name, "new_tokens": new_tokens, "methods": stats}
    tables = [table(note, ["method", "lossless", "tokens", "tau", "decode s", "speedup vs ar"], rows)]
    if diffs:
        raise CheckFailed(f"outputs differ from ar's (prompt: first differing position): {diffs}", results, tables)
    return results, tables
