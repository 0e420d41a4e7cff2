"""What a verify round costs on this machine, in AR steps: the target forward over k tokens after a prompt.

    python benchmarks/verify_cost.py                          # SmolLM2-135M, fp32 and bf16 side by side
    python benchmarks/verify_cost.py --dtype auto --k 1 8 16  # only the precision domino-decode would pick
    python benchmarks/verify_cost.py --target smollm2 --prompt 400 --threads 2
    python benchmarks/verify_cost.py --dtype float32 --prepack false auto --engine hf lean  # kernels x engines

A chain of block size B verifies B tokens per round, a tree of budget N verifies N + 1; a round pays
off when tau exceeds (verify cost + draft cost) / (one AR step). On a GPU k tokens cost about one step
up to k ~ 64; on a CPU the cost depends on the precision (`inference.precision`): fp32 GEMMs grow with
k, bf16 ones on a CPU with bf16 instructions stay nearly flat to k = 16. Each k is timed as the median
of `--repeats` forwards that extend the same cached prompt and are then cropped away, with features of
the drafter's layers captured as decoding does (`inference.decoding.cost_model.measure_verify_curve`, the
curve `tree.budget=auto` and `chain.window=auto` choose by).
"""

from __future__ import annotations

import argparse

import torch

from inference import load_target
from inference.decoding.cost_model import measure_verify_curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="smollm2")
    parser.add_argument(
        "--dtype", nargs="+", default=["float32", "bfloat16", "bf16-weights"], help="auto or a precision"
    )
    parser.add_argument("--prompt", type=int, default=200, help="cached prompt tokens before the verified window")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--layer-ids", type=int, nargs="*", default=[1, 10, 18, 27])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--prepack",
        nargs="+",
        default=["auto"],
        help="auto, true, false: the linears' kernels (measured, oneDNN, plain)",
    )
    parser.add_argument("--engine", nargs="+", default=["auto"], help="auto, lean, hf: the target's forward")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    columns = {}
    prepacks = [_switch(p) for p in args.prepack]
    for dtype in dict.fromkeys(args.dtype):
        for packed in prepacks:
            for engine in args.engine:
                target = load_target(args.target, dtype=dtype, device="cpu", prepack=packed, engine=engine)
                curve = measure_verify_curve(target, args.prompt, args.k, args.layer_ids, args.repeats, far=None)
                label = f"{target.precision_name} {target.engine} {target.kernel_policy.mode}"
                columns[label] = dict(zip(curve.windows, curve.seconds, strict=True))
                del target
    print(
        f"{args.target}: {args.prompt}-token cached prompt, threads {torch.get_num_threads()}, median of {args.repeats}"
    )
    print("    k | " + " | ".join(f"{d:>16} ms  AR steps" for d in columns))
    for k in args.k:
        cells = []
        for times in columns.values():
            step = times.get(1) or min(times.values())
            cells.append(f"{times[k] * 1e3:19.1f}  {times[k] / step:8.2f}")
        print(f"{k:>5} | " + " | ".join(cells))


def _switch(value: str) -> bool | str:
    """A `--prepack` value as `load_target` takes it."""
    return {"true": True, "false": False}.get(value.lower(), value)


if __name__ == "__main__":
    main()
