"""What a verify round costs on this machine, in AR steps: the target forward over k tokens after a prompt.

    python benchmarks/verify_cost.py                        # SmolLM2-135M, k = 1 2 4 8 16 32
    python benchmarks/verify_cost.py --target smollm2 --prompt 400 --k 1 8 16

A chain of block size B verifies B tokens per round, a tree of budget N verifies N + 1; a round pays
off when tau exceeds (verify cost + draft cost) / (one AR step). On a GPU k tokens cost about one step
up to k ~ 64; on a CPU the cost grows with k, which is what the CPU geometry (block size) is chosen on.
Each k is timed as the median of `--repeats` forwards that extend the same cached prompt and are then
cropped away, with features of the drafter's layers captured as decoding does.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from inference import load_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="smollm2")
    parser.add_argument("--prompt", type=int, default=200, help="cached prompt tokens before the verified window")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--layer-ids", type=int, nargs="*", default=[1, 10, 18, 27])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(args.target)
    g = torch.Generator().manual_seed(0)
    vocab = target.config.vocab_size
    prompt = torch.randint(0, vocab, (1, args.prompt), generator=g)
    cache = target.new_cache()
    with torch.inference_mode():
        target(prompt, cache=cache)
        results = {}
        for k in args.k:
            window = torch.randint(0, vocab, (1, k), generator=g)
            times = []
            for i in range(args.repeats + 2):
                t0 = time.perf_counter()
                target(window, cache=cache, layer_ids=args.layer_ids)
                dt = time.perf_counter() - t0
                target.crop_cache(cache, args.prompt)
                if i >= 2:  # warm-up
                    times.append(dt)
            results[k] = statistics.median(times)
    step = results.get(1) or min(results.values())
    print(f"{target.name}: {args.prompt}-token cached prompt, threads {torch.get_num_threads()}")
    for k, s in results.items():
        print(f"  k = {k:>3}: {s * 1e3:7.1f} ms  = {s / step:4.2f} AR steps")


if __name__ == "__main__":
    main()
