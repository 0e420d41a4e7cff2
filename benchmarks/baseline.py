"""The strong baseline: `transformers`' own `generate` beside this project's `ar` and its speculative methods,
same target, same prompts, same threads, one process; and the memory-bound limit of a decode step.

    python benchmarks/baseline.py                                   # 10 + 10 prompts, 64 tokens
    python benchmarks/baseline.py --prompts mt-bench:40 humaneval:40 --methods ar domino dominotree
    python benchmarks/baseline.py --dtype float32                   # the project in fp32 (a second machine class)

`generate` runs greedy in fp32 and in bf16 (HF's eager forward and dynamic cache, SDPA attention, as a user
would call it) and the faster is the baseline a user would pick. The project runs in `--dtype` (default
auto: measured, `inference.kernels.choice`) on its default engine. Every row reports output tokens per
second over prefill + decode, summed over the prompts; the limit is the weight bytes one decode step must
read divided by the machine's read bandwidth (`inference.kernels.memory`, as `benchmarks/platform_report.py`
reports it), and `ar`'s step is given in multiples of it.
"""

from __future__ import annotations

import argparse
import time

import torch

from inference import load_target
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.drafter import DominoDrafter
from inference.eval.prompt_sets import load_benchmark
from inference.kernels.memory import read_bandwidth, step_bytes

DRAFTERS = {"domino": "pretrained/smollm2-135m-domino", "dflash": "pretrained/smollm2-135m-dflash"}
BASELINE_METHODS = {"dflash", "ddtree"}  # draft with the DFlash drafter, as domino-decode's baseline_drafter_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="smollm2")
    parser.add_argument("--prompts", nargs="+", default=["mt-bench:10", "humaneval:10"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--dtype", default="auto", help="the project's precision: auto, float32, bfloat16, bf16-weights"
    )
    parser.add_argument("--methods", nargs="+", default=["ar", "domino", "dominotree"])
    parser.add_argument("--budget", default="auto", help="dominotree / ddtree node budget: auto or a number")
    parser.add_argument("--drafter", default=DRAFTERS["domino"])
    parser.add_argument("--baseline-drafter", default=DRAFTERS["dflash"])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--skip-generate", action="store_true", help="only the project's methods")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    target = load_target(args.target, dtype=args.dtype)
    prompts = [
        target.chat_ids([{"role": "user", "content": p.turns[0]}]) for s in args.prompts for p in load_benchmark(s)[1]
    ]
    rows: dict[str, float] = {}
    if not args.skip_generate:
        for dtype in ("float32", "bfloat16"):
            rows[f"transformers generate ({dtype})"] = _generate_rate(args.target, dtype, prompts, args.max_new_tokens)
    best_generate = max(rows.values()) if rows else None

    drafters = {}
    for method in args.methods:
        if method != "ar":
            path = args.baseline_drafter if method in BASELINE_METHODS else args.drafter
            if path not in drafters:
                drafters[path] = DominoDrafter.from_pretrained(
                    path, target.config, device=target.device, dtype=target.dtype
                ).bind_target(target.embed_tokens, target.lm_head)
    budget = args.budget if args.budget == "auto" else int(args.budget)
    tree = TreeOptions(budget=budget)
    options = DecodeOptions(chain_window="auto")
    ar_step = None
    for method in args.methods:
        drafter = None
        if method != "ar":
            drafter = drafters[args.baseline_drafter if method in BASELINE_METHODS else args.drafter]
        decoder = build_decoder(method, target, drafter, options, tree)
        decoder.generate(prompts[0], 16)  # warm-up: allocations, cost curves, kernel tables
        tokens = seconds = 0.0
        decode_s = steps = 0.0
        for ids in prompts:
            out = decoder.generate(ids, args.max_new_tokens)
            tokens += out.stats.output_tokens
            seconds += out.stats.prefill_s + out.stats.decode_s
            decode_s += out.stats.decode_s
            steps += max(out.stats.output_tokens - 1, 0)
        if method == "ar":
            ar_step = decode_s / max(steps, 1)
        rows[f"domino {method} ({target.precision_name}, {target.engine})"] = tokens / seconds

    bandwidth = read_bandwidth()
    limit = step_bytes(target) / bandwidth
    print(
        f"{args.target}: {len(prompts)} prompts ({', '.join(args.prompts)}), {args.max_new_tokens} new tokens, "
        f"greedy, threads {torch.get_num_threads()}"
    )
    print(f"{'':48} tok/s   x generate (best)")
    for name, rate in rows.items():
        ratio = f"{rate / best_generate:8.2f}x" if best_generate else ""
        print(f"{name:48} {rate:6.1f}  {ratio}")
    print(
        f"memory-bound limit: {step_bytes(target) / 2**20:.0f} MiB per step / {bandwidth / 1e9:.1f} GB/s = "
        f"{limit * 1e3:.1f} ms ({1 / limit:.0f} tok/s)"
        + (f"; ar's step {ar_step * 1e3:.1f} ms = {ar_step / limit:.2f}x the limit" if ar_step else "")
    )


def _generate_rate(spec: str, dtype: str, prompts: list[list[int]], max_new_tokens: int) -> float:
    """Output tokens per second of `transformers`' greedy `generate` (eager forward, dynamic cache)."""
    from transformers import AutoModelForCausalLM

    from inference.targets.loader import model_folder

    model = AutoModelForCausalLM.from_pretrained(model_folder(spec), dtype=getattr(torch, dtype)).eval()
    config = model.generation_config
    kwargs = dict(do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=config.eos_token_id)
    with torch.inference_mode():
        model.generate(torch.tensor([prompts[0]]), **{**kwargs, "max_new_tokens": 16})
        tokens, seconds = 0, 0.0
        for ids in prompts:
            x = torch.tensor([ids])
            t0 = time.perf_counter()
            out = model.generate(x, **kwargs)
            seconds += time.perf_counter() - t0
            tokens += out.shape[1] - x.shape[1]
    return tokens / seconds


if __name__ == "__main__":
    main()
