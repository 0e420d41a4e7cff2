"""What the Domino head adds to a draft round: `domino` vs `dflash` draft time, random Qwen3-shaped drafters.

    python benchmarks/head_overhead.py --device cuda            # Qwen3-4B and Qwen3-8B shapes, 5 draft layers

A `dflash` round drafts with the backbone (one forward over the block against the cached context) and
the lm_head, then takes the argmax; a `domino` round does the same and then rolls the GRU head out over
the block (`GreedyChainRollout`, one CUDA graph on GPUs, as `ChainDecoder` runs it). The overhead is
(domino - dflash) / dflash per round. The DominoTree paper reports +2.8 % end-to-end latency on Qwen3-4B;
this measures the draft stage only, so it is an upper bound on what the head adds to a whole round.
`--json PATH` also writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json

import torch
from tree_build import drafter_for, time_rounds

from inference.decoding.chain.rollout import GreedyChainRollout
from inference.precision import resolve_dtype


def head_overhead(spec: str, device: str, dtype: torch.dtype, context: int, rounds: int, layers: int = 5) -> dict:
    """Median ms per round of the dflash and domino draft stages for one target shape, and the overhead."""
    drafter = drafter_for(spec, device, dtype, num_draft_layers=layers).eval()
    cfg = drafter.config
    g = torch.Generator(device=device).manual_seed(2)
    cache = drafter.new_cache(1, context + cfg.block_size + 1)
    features = torch.randn(1, context, cfg.num_context_features * cfg.hidden_size, device=device, generator=g)
    drafter.append_context(cache, features.to(dtype))
    root = torch.tensor([17], device=device)
    rollout = GreedyChainRollout(drafter, cuda_graph=device == "cuda")

    def dflash() -> torch.Tensor:
        hidden = drafter.draft_hidden_slice(drafter.draft_block(cache, root))[0]
        return drafter.vocab.to_target_ids(drafter.lm_head(hidden).argmax(-1))

    def domino() -> torch.Tensor:
        hidden = drafter.draft_hidden_slice(drafter.draft_block(cache, root))[0]
        return rollout(hidden, drafter.lm_head(hidden), root)

    dflash_ms, domino_ms = time_rounds(dflash, rounds, device), time_rounds(domino, rounds, device)
    return {
        "target": spec,
        "draft_layers": layers,
        "context": context,
        "dflash_ms": dflash_ms,
        "domino_ms": domino_ms,
        "overhead_pct": 100 * (domino_ms - dflash_ms) / dflash_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--context", type=int, default=512, help="committed positions in the draft cache")
    parser.add_argument("--targets", nargs="+", default=["Qwen/Qwen3-4B", "Qwen/Qwen3-8B"])
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    dtype = resolve_dtype("auto", args.device)  # the precision policy: what domino-decode would run
    print(f"device {args.device}, dtype {dtype}, median of {args.rounds} rounds (ms per draft stage)")
    rows = []
    with torch.inference_mode():
        for spec in args.targets:
            row = head_overhead(spec, args.device, dtype, args.context, args.rounds)
            rows.append(row)
            print(
                f"{spec}: dflash {row['dflash_ms']:.2f}, domino {row['domino_ms']:.2f} (+{row['overhead_pct']:.1f} %)"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "dtype": str(dtype), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
