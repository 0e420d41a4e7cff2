"""Stage 5: real decoding on the GPU: SmolLM2-135M with the shipped reference drafters, every method.

Needs `pretrained/smollm2-135m-domino` and `pretrained/smollm2-135m-dflash` in the checkout (skipped
without them). Each method decodes the same prompts greedily after one warm-up generation (CUDA graph
capture, kernel selection); `dflash` and `ddtree` run the DFlash drafter, `domino` and `dominotree` the
Domino drafter. Lossless, in bf16 as `domino-decode` judges it (`inference.eval.divergence`): every
committed token is the argmax of the method's own verify logits (`own_argmax_violations`), and each
output equals `ar`'s (`exact`) or first parts from it at a divergence proven numerical by replaying both
sides (`numerical`, with both margins and both distances); any other divergence (`algorithmic`) fails
the stage and names the prompt and the proof. The noise floor is reported beside them. Speedup: `ar`'s
decode time over the method's, summed over the prompts; tau: tokens committed per verify round. Dry
run: the tiny Qwen3 target with random drafters on the CPU in fp32 (lossless is still checked; speedups
are not claimed).
"""

from __future__ import annotations

import torch
from gpu_check import ROOT
from tree_build import drafter_for

from checks.context import CheckFailed, Context, StageSkipped, table
from inference import DominoDrafter, TargetModel, load_target
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.api import prompt_ids
from inference.decoding.generation import Decoder, Generation
from inference.eval.divergence import ALGORITHMIC, DIVERGENCE_CLASSES, classify, measure_noise, prove_divergence

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


def reference_setup(ctx: Context) -> tuple:
    """The target, the drafters by kind ("domino", "dflash"), the prompts' token ids and the tokens per
    generation: SmolLM2 with the shipped drafters on a GPU run, the tiny target with random drafters in the
    dry run. Skips the stage when the checkout has no pretrained drafters."""
    if ctx.dry_run:
        target = load_target("tiny-qwen3", dtype=ctx.dtype, device="cpu")
        drafters = {  # random drafters of the tiny target's shape, drafting from its embedding and lm_head
            kind: drafter_for("tiny-qwen3", "cpu", torch.float32, 2, head).bind_target(
                target.embed_tokens, target.lm_head
            )
            for kind, head in (("domino", "domino"), ("dflash", None))
        }
        return target, drafters, [[1, 2, 3, 4, 5, 6, 7, 8], [40, 41, 42, 43]], 12
    missing = [str(p.relative_to(ROOT)) for p in DRAFTERS.values() if not (p / "config.json").is_file()]
    if missing:
        raise StageSkipped(f"no pretrained drafters ({', '.join(missing)} missing in the checkout)")
    target = load_target("smollm2", device=ctx.device)
    drafters = {k: DominoDrafter.from_pretrained(p, target=target).eval() for k, p in DRAFTERS.items()}
    return target, drafters, [prompt_ids(target, p) for p in PROMPTS], 128


def timed_runs(decoder: Decoder, prompts: list[list[int]], new_tokens: int) -> list[Generation]:
    """One warm-up generation (graph capture, kernel choice, allocator), then every prompt."""
    decoder.generate(prompts[0], 8)
    return [decoder.generate(p, new_tokens) for p in prompts]


def summarise(runs: list[Generation]) -> dict:
    """The figures summed over a method's generations: decode seconds, output tokens, rounds, mean tau."""
    taus = [r.stats.tau for r in runs if r.stats.tau is not None]
    return {
        "decode_s": sum(r.stats.decode_s for r in runs),
        "output_tokens": sum(len(r.tokens) for r in runs),
        "rounds": sum(r.stats.rounds for r in runs),
        "tau": sum(taus) / len(taus) if taus else None,
    }


def noise_floor(target: TargetModel, prompts: list, ar_outputs: list, window: int) -> float:
    """The run's noise floor: the largest over the prompts of `measure_noise` on `ar`'s own outputs, for
    verify windows of `window` tokens (what a divergence within it is a numerical tie against)."""
    return max(measure_noise(target, p, out, window) or 0.0 for p, out in zip(prompts, ar_outputs, strict=True))


def divergence_counts(
    decoder: Decoder, ar: Decoder, prompts: list, expected: list, runs: list[Generation], new_tokens: int
) -> tuple[dict, dict, dict]:
    """Counts of exact / numerical / algorithmic outputs against `expected` (ar's), every proof by prompt
    index, and the algorithmic ones (prompt index -> its proof, or the own-argmax violations)."""
    counts, proofs, bugs = dict.fromkeys(DIVERGENCE_CLASSES, 0), {}, {}
    for i, (prompt, want, run) in enumerate(zip(prompts, expected, runs, strict=True)):
        sizes = run.stats.draft_sizes
        found = (
            prove_divergence(decoder, ar, prompt, want, run.tokens, new_tokens, sizes) if decoder is not ar else None
        )
        violations = run.stats.own_argmax_violations
        kind = classify(found.to_dict() if found else None, found is None, violations)
        counts[kind] += 1
        if found is not None:
            proofs[i] = found.to_dict()
        if kind == ALGORITHMIC:
            bugs[i] = found.to_dict() if found else {"own_argmax_violations": violations}
    return counts, proofs, bugs


@torch.inference_mode()
def run(ctx: Context) -> tuple[dict, list]:
    target, drafters, prompts, new_tokens = reference_setup(ctx)
    outputs: dict[str, list[Generation]] = {}
    decoders: dict[str, Decoder] = {}
    stats: dict[str, dict] = {}
    for method, drafter_key in METHODS.items():
        drafter = drafters[drafter_key] if drafter_key else None
        decoders[method] = build_decoder(method, target, drafter, DecodeOptions(), TreeOptions())
        outputs[method] = timed_runs(decoders[method], prompts, new_tokens)
        stats[method] = summarise(outputs[method])
    ar_s = stats["ar"]["decode_s"]
    window = TreeOptions().budget + 1  # the widest verify window of the run: a tree's
    expected = [r.tokens for r in outputs["ar"]]
    floor = noise_floor(target, prompts, expected, window)
    diffs = {}
    for method in METHODS:
        counts, proofs, bugs = divergence_counts(
            decoders[method], decoders["ar"], prompts, expected, outputs[method], new_tokens
        )
        if bugs:
            diffs[method] = bugs
        violations = sum(r.stats.own_argmax_violations for r in outputs[method])
        stats[method].update(divergences=counts, proofs=proofs, own_argmax_violations=violations)
        stats[method].update(noise_floor=floor, lossless=counts[ALGORITHMIC] == 0)
        stats[method]["speedup_vs_ar"] = ar_s / stats[method]["decode_s"] if stats[method]["decode_s"] else None
    rows = [
        [m, s["lossless"], "/".join(str(v) for v in s["divergences"].values()), s["own_argmax_violations"]]
        + [s["output_tokens"], s["tau"] or "", s["decode_s"], s["speedup_vs_ar"] or ""]
        for m, s in stats.items()
    ]
    note = "dry run, no speedup claimed" if ctx.dry_run else f"SmolLM2-135M, {len(prompts)} prompts, greedy"
    results = {"target": target.name, "dtype": str(target.dtype), "new_tokens": new_tokens, "methods": stats}
    header = ["method", "lossless", "exact/numerical/algorithmic", "own-argmax violations", "tokens", "tau"]
    header += ["decode s", "speedup vs ar"]
    tables = [table(f"{note}, noise floor {floor:.3g} logits (reported only)", header, rows)]
    proven = [
        [m, i, p["position"], p["kind"], p["method_margin"], p["ar_margin"], p["distance"], p["reference_distance"]]
        for m, s in stats.items()
        for i, p in s["proofs"].items()
    ]
    if proven:
        header = ["method", "prompt", "position", "kind", "method margin", "ar margin", "distance", "plain distance"]
        tables.append(table("divergences from ar's outputs, replayed", header, proven))
    if diffs:
        raise CheckFailed(f"algorithmic divergences from ar's outputs (prompt: where): {diffs}", results, tables)
    return results, tables
