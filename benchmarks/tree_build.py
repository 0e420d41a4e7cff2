"""Time DominoTree construction per round for Qwen3-4B- and Qwen3-8B-shaped drafters (random weights).

    python benchmarks/tree_build.py                    # CPU: eager only
    python benchmarks/tree_build.py --device cuda      # GPU: eager and CUDA graphs

Only the tree build is timed (setup + best-first expansions, including each expansion step's
device-to-host read; `--width` frontier nodes per head step, as `tree.expand_width`), on random backbone
outputs: no checkpoint or target weights are needed. The backbone is built with one layer because the
tree build never touches it. Reference figures (DominoTree paper, Qwen3-4B,
budget 16): 3.67 ms eager, 2.31 ms with CUDA graphs per round; this project's goal is at most 1.0 ms
with graphs. `--json PATH` also writes the rows as JSON (what `benchmarks/gpu_check.py` reads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from inference.decoding.tree.build import best_first_batched, build_ddtree
from inference.decoding.tree.expander import FastDominoExpander
from inference.drafter import DominoDrafter
from inference.drafter.config import DrafterConfig
from inference.drafter.layout import default_target_layer_ids
from inference.precision import resolve_dtype
from inference.targets.loader import load_target_config


def drafter_for(
    spec: str, device: str, dtype: torch.dtype, num_draft_layers: int = 1, head: str | None = "domino"
) -> DominoDrafter:
    """A random drafter of the recipe's shape for `spec` (5 context features, as the 5-layer recipe reads),
    bound to a random embedding and lm_head of the target's size: no weights are needed. `head=None`: DFlash."""
    hf = load_target_config(spec)
    layer_ids = default_target_layer_ids(hf.num_hidden_layers, 5)  # Qwen3 (36 layers): [1, 9, 17, 25, 33]
    # The last embedding row as MASK: padded past the tokenizer in Qwen3 and the tiny targets (any id will do).
    config = DrafterConfig.from_target_config(
        hf, num_draft_layers=num_draft_layers, head=head, target_layer_ids=layer_ids, mask_token_id=hf.vocab_size - 1
    )
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: a CPU init of an 8B-shaped drafter takes seconds
        drafter = DominoDrafter(config).to(dtype)
        embed = torch.nn.Embedding(hf.vocab_size, hf.hidden_size).to(dtype)
        lm_head = torch.nn.Linear(hf.hidden_size, hf.vocab_size, bias=False).to(dtype)
    return drafter.bind_target(embed, lm_head)


def time_rounds(fn, rounds: int, device: str) -> float:
    """Median milliseconds per call of `fn` after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(rounds):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def bench_target(
    spec: str, budgets: list[int], modes: list[bool], rounds: int, device: str, dtype: torch.dtype, width: int = 8
) -> list[tuple[int, list[float]]]:
    """Rows of (budget, [ddtree ms, dominotree ms per mode]) for one target shape."""
    drafter = drafter_for(spec, device, dtype)
    cfg = drafter.config
    g = torch.Generator(device=device).manual_seed(1)
    hidden = torch.randn(cfg.num_draft_tokens, cfg.hidden_size, device=device, generator=g).to(dtype)
    base = (torch.randn(cfg.num_draft_tokens, cfg.vocab_size, device=device, generator=g) * 4).to(dtype)
    root = torch.tensor([17], device=device)
    rows = []
    for budget in budgets:
        row = [time_rounds(lambda: build_ddtree(base, budget), rounds, device)]  # noqa: B023 - called at once
        for graph in modes:
            expander = FastDominoExpander(drafter, 64, 8, budget, cuda_graph=graph, width=width)

            def build(e: FastDominoExpander = expander, b: int = budget) -> None:
                best_first_batched(e.prepare(hidden, base, root), b, cfg.num_draft_tokens, width)

            row.append(time_rounds(build, rounds, device))
        rows.append((budget, row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--targets", nargs="+", default=["Qwen/Qwen3-4B", "Qwen/Qwen3-8B"])
    parser.add_argument("--width", type=int, default=8, help="frontier nodes per head step (1 = one at a time)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    dtype = resolve_dtype("auto", args.device)  # the precision policy: what domino-decode would run
    modes = [False, True] if args.device == "cuda" else [False]
    print(f"device {args.device}, dtype {dtype}, width {args.width}, median of {args.rounds} rounds (ms per round)")
    header = ["target", "budget", "ddtree"] + [f"dominotree {'graph' if g else 'eager'}" for g in modes]
    print(" | ".join(header))
    records = []
    with torch.inference_mode():
        for spec in args.targets:
            for budget, row in bench_target(spec, args.budgets, modes, args.rounds, args.device, dtype, args.width):
                print(" | ".join([spec.split("/")[-1], str(budget)] + [f"{t:.2f}" for t in row]))
                records.append({"target": spec, "budget": budget, **dict(zip(header[2:], row, strict=True))})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "dtype": str(dtype), "rounds": args.rounds, "rows": records}, f, indent=1)


if __name__ == "__main__":
    main()
