"""`domino-export CKPT OUT`: a training checkpoint -> the public drafter folder (see DESIGN.md 2).

CKPT is a Lightning `.ckpt` file or a DeepSpeed ZeRO-2/3 checkpoint directory (which Lightning also
names `*.ckpt`); both carry the drafter's `config.json` and the data manifest (`on_save_checkpoint`).
Every drafter weight must be present: a checkpoint that lost part of the drafter is refused, never
exported with random weights.
"""

from __future__ import annotations

import argparse

import torch

from domino_train.export import export_checkpoint
from domino_train.model_card import read_decode_results
from inference.drafter.checkpoint import DrafterCheckpointError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="domino-export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a Lightning .ckpt file or a DeepSpeed checkpoint directory")
    parser.add_argument("out", help="the drafter folder to write (config.json + model.safetensors)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument(
        "--decode-results", help="a domino-decode results.json: its held-out table goes on the model card"
    )
    args = parser.parse_args(argv)
    try:
        decode = read_decode_results(args.decode_results) if args.decode_results else None
        out = export_checkpoint(args.checkpoint, args.out, getattr(torch, args.dtype), decode)
    except (FileNotFoundError, ValueError, DrafterCheckpointError) as e:
        raise SystemExit(f"domino-export: {e}") from None
    print(f"exported drafter -> {out}")


if __name__ == "__main__":
    main()
