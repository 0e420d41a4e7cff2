"""The lossless check's numbers on the real target: every method on fixed held-out instructions at T = 0,
the own-argmax violations, the divergence classes and, per divergence, its replayed proof.

    python benchmarks/lossless_proof.py --dtype bfloat16            # 8 prompts x 48 tokens, ~30 min on 2 AVX2 cores
    python benchmarks/lossless_proof.py --dtype float32 --prompts 4

The instructions are this script's own (not MT-Bench or HumanEval). `ratio` is the divergence's distance
from `ar`'s logits over a plain same-width forward's (`inference.eval.divergence`: numerical needs <= 2).
"""

from __future__ import annotations

import argparse
import time

from inference import DominoDrafter, load_target
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.eval.loop import run_dataset
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.eval.results import summarize

INSTRUCTIONS = (
    "Explain how a refrigerator keeps food cold.",
    "Write a short poem about autumn leaves.",
    "List three ways to save water at home.",
    "What is the difference between a virus and a bacterium?",
    "Write a Python function that reverses a linked list.",
    "Describe the water cycle for a ten-year-old.",
    "Give me a recipe for pancakes.",
    "Why is the sky blue?",
    "Summarize the plot of a heist movie you invent.",
    "Write a bash one-liner that counts lines in all .py files.",
    "How do vaccines train the immune system?",
    "Compare renting and buying a home.",
)
DRAFTERS = {"domino": "pretrained/smollm2-135m-domino", "dflash": "pretrained/smollm2-135m-dflash"}
METHODS = {"dflash": "dflash", "domino": "domino", "ddtree": "dflash", "dominotree": "domino"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    target = load_target("smollm2", dtype=args.dtype)
    drafters = {k: DominoDrafter.from_pretrained(p, target=target, dtype=target.dtype) for k, p in DRAFTERS.items()}
    decoders = {"ar": build_decoder("ar", target, options=DecodeOptions())}
    for method, kind in METHODS.items():
        decoders[method] = build_decoder(method, target, drafters[kind], DecodeOptions(), TreeOptions())
    prompts = [BenchmarkPrompt(f"p{i}", (text,)) for i, text in enumerate(INSTRUCTIONS[: args.prompts])]
    began = time.perf_counter()
    records = run_dataset("held-out", prompts, decoders, target, args.max_new_tokens, progress=False, noise_window=17)
    results = summarize(records, check_lossless=True)["held-out"]
    print(
        f"SmolLM2-135M {target.precision_name} on the {target.engine} engine, {len(prompts)} prompts x "
        f"{args.max_new_tokens} tokens, {time.perf_counter() - began:.0f} s"
    )
    print(f"{'method':<12}{'own-argmax violations':>24}{'exact / numerical / algorithmic':>34}")
    for method, s in results.items():
        if method != "ar":
            counts = " / ".join(str(v) for v in s["divergences"].values())
            print(f"{method:<12}{s['own_argmax_violations']:>24}{counts:>34}")
    print(f"noise floor (reported only): {results['dflash']['noise_floor']:.3g} logits")
    print("method      prompt pos  method margin  ar margin  distance  plain distance  ratio  width  kind")
    for r in records:
        d = r.divergence
        if d and d.get("reference_distance") is not None:
            ratio = d["distance"] / d["reference_distance"] if d["reference_distance"] else float("inf")
            print(
                f"{r.method:<12}{r.prompt_id:<7}{d['position']:>3}{d['method_margin']:>15.4f}{d['ar_margin']:>11.4f}"
                f"{d['distance']:>10.4f}{d['reference_distance']:>16.4f}{ratio:>7.2f}{d['width']:>7}  {d['kind']}"
            )
        elif d:
            print(f"{r.method:<12}{r.prompt_id:<7}{d['position']:>3}  {d['kind']}: {d['reason']}")


if __name__ == "__main__":
    main()
