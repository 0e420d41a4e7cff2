"""`domino-export CKPT OUT`: a training checkpoint -> the public drafter folder (see DESIGN.md 2).

CKPT is a Lightning `.ckpt` file or a DeepSpeed ZeRO-2/3 checkpoint directory (which Lightning also
names `*.ckpt`); both carry the drafter's `config.json` and the data manifest (`on_save_checkpoint`).
Every drafter weight must be present: a checkpoint that lost part of the drafter is refused, never
exported with random weights. OUT must be new, empty or an earlier export (which is replaced); any other
folder (a target model's, say) is refused unless `--force`. The export prints one line saying which serving
stacks can load the drafter (the model card's Serving section says the same). `domino-export
--serving-section FOLDER` rewrites only that section of an existing drafter folder's README.md from its
config.json, and `--decoding-section FOLDER --decode-results results.json` only its Held-out decoding
section from a new domino-decode run (weights untouched).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from domino_train.export.folder import export_checkpoint
from domino_train.export.model_card import rewrite_decoding_section, rewrite_serving_section
from inference.drafter.checkpoint import DrafterCheckpointError
from inference.drafter.serving import serving_line
from inference.eval.results import read_results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="domino-export", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", help="a Lightning .ckpt file or a DeepSpeed checkpoint directory")
    parser.add_argument("out", nargs="?", help="the drafter folder to write (config.json + model.safetensors)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument(
        "--force", action="store_true", help="write into OUT even when it holds files that are not an earlier export"
    )
    parser.add_argument(
        "--decode-results", help="a domino-decode results.json: its held-out table goes on the model card"
    )
    parser.add_argument(
        "--serving-section",
        metavar="FOLDER",
        help="only rewrite the Serving section of FOLDER/README.md from FOLDER/config.json (no checkpoint)",
    )
    parser.add_argument(
        "--decoding-section",
        metavar="FOLDER",
        help="only rewrite the Held-out decoding section of FOLDER/README.md from --decode-results (no checkpoint)",
    )
    args = parser.parse_args(argv)
    if args.decoding_section:
        if args.checkpoint or args.out or not args.decode_results:
            parser.error("--decoding-section takes --decode-results and no checkpoint or output folder")
        try:
            card = rewrite_decoding_section(args.decoding_section, read_results(args.decode_results))
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(f"domino-export: error: {e}") from None
        print(f"rewrote the Held-out decoding section of {card}")
        return
    if args.serving_section:
        if args.checkpoint or args.out:
            parser.error("--serving-section takes no checkpoint or output folder")
        try:
            card = rewrite_serving_section(args.serving_section)
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(f"domino-export: error: {e}") from None
        print(f"rewrote the Serving section of {card}")
        print(serving_line(json.loads((card.parent / "config.json").read_text())))
        return
    if not (args.checkpoint and args.out):
        parser.error("a checkpoint and an output folder are required")
    try:
        decode = read_results(args.decode_results) if args.decode_results else None
        out = export_checkpoint(args.checkpoint, args.out, getattr(torch, args.dtype), decode, args.force)
    except (FileNotFoundError, ValueError, DrafterCheckpointError) as e:
        raise SystemExit(f"domino-export: error: {e}") from None
    print(f"exported drafter -> {out}")
    print(serving_line(json.loads((Path(out) / "config.json").read_text())))


if __name__ == "__main__":
    main()
