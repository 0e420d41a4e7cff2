"""What a batched verify pays for its widest row: ragged forwards of equal and uneven window widths.

    python benchmarks/ragged_widths.py                       # SmolLM2-135M, 4 rows, after 100 and 400 tokens
    python benchmarks/ragged_widths.py --contexts 400 --layouts 3,3,3,3 9,1,1,1 --threads 2

A ragged verify runs the rows' real tokens packed through every per-token op, but attention runs every
row as wide as the widest (`inference.targets.ragged_forward`): each layout's median seconds over
`--repeats` forwards after cached random prompts of each context length, the layouts timed in turn
(`inference.decoding.batch_budget.time_layouts`, as the batch curve times them), with the drafter
layers' features captured as decoding does. Layouts of the same real
tokens and different widths give the price of a pad slot, which `tree.budget=auto` at concurrency > 1
reads from the batch curve (`VerifyCurve.pad`).
"""

from __future__ import annotations

import argparse

import torch

from inference import load_target
from inference.decoding.batch_budget import time_layouts

LAYOUTS = ["3,3,3,3", "9,1,1,1", "9,9,9,9", "4,4,4,4", "13,1,1,1", "13,13,13,13"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="smollm2")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--contexts", type=int, nargs="+", default=[100, 400], help="cached tokens before the window")
    parser.add_argument("--layouts", nargs="+", default=LAYOUTS, help="each row's window width, comma-separated")
    parser.add_argument("--layer-ids", type=int, nargs="*", default=[1, 10, 18, 27])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    layouts = {name: [int(w) for w in name.split(",")] for name in args.layouts}
    rows = {len(widths) for widths in layouts.values()}
    if len(rows) != 1 or min(w for widths in layouts.values() for w in widths) < 1:
        parser.error("every layout needs the same number of rows, each at least 1 token wide")
    (batch,) = rows
    target = load_target(args.target, dtype=args.dtype, device="cpu")
    g = torch.Generator().manual_seed(0)
    print(f"{args.target} ({target.precision_name}, {target.engine}), {batch} rows, threads {torch.get_num_threads()}")
    print("| widths | real tokens | " + " | ".join(f"after {c} cached" for c in args.contexts) + " |")
    print("|---|---|" + "---|" * len(args.contexts))
    seconds = {}
    for context in args.contexts:
        times = time_layouts(target, list(layouts.values()), context, args.layer_ids, args.repeats, g)
        seconds[context] = dict(zip(layouts, times, strict=True))
    for name, widths in layouts.items():
        cells = " | ".join(f"{1e3 * seconds[c][name]:.1f} ms" for c in args.contexts)
        print(f"| {name.replace(',', ', ')} | {sum(widths)} | {cells} |")


if __name__ == "__main__":
    main()
