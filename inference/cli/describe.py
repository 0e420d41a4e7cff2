"""`domino-describe TARGET`: what a drafter for TARGET looks like, before any training.

Prints the target's shape, the drafter's configuration and its parameter counts (backbone, GRU,
correction) built on the `meta` device, so it runs for Qwen3-8B on a laptop. With `--load` it also loads
the target's weights, verifies a prompt and drafts one block with a randomly initialised drafter,
exercising the whole feature / cache path end to end. The MASK id is the one training would pick: Qwen3's
fixed id, else a reserved token of the target's tokenizer (read without the weights).
`domino-describe DRAFTER_FOLDER` (a folder whose config.json is a drafter's) describes that drafter
instead, and which serving stacks can load it: the Serving section its model card carries.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from inference.cli.errors import one_line_errors
from inference.drafter import DominoDrafter
from inference.drafter.config import DrafterConfig
from inference.drafter.layout import DFLASH_ARCHITECTURE, DOMINO_ARCHITECTURE, repeated_layers_note
from inference.drafter.serving import serving_section
from inference.targets.loader import load_target, load_target_config
from inference.targets.mask_token import default_mask_token_id


def parameter_table(drafter: DominoDrafter) -> list[tuple[str, int]]:
    def count(module: torch.nn.Module | None) -> int:
        return 0 if module is None else sum(p.numel() for p in module.parameters())

    rows = [("backbone", count(drafter.backbone))]
    if drafter.head is not None:
        rows += [
            ("head.prefix_gru", count(drafter.head.prefix_gru)),
            ("head.embed_proj.0 (W1)", count(drafter.head.embed_proj[0])),
            ("head.embed_proj.2 (W2)", count(drafter.head.embed_proj[2])),
        ]
    return rows


def drafter_config_json(path: str) -> dict | None:
    """The config.json of a drafter folder at `path`; None when `path` is not one (a target name or folder)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return None
    d = json.loads(config.read_text())
    return d if (d.get("architectures") or [None])[0] in (DFLASH_ARCHITECTURE, DOMINO_ARCHITECTURE) else None


def print_parameters(drafter: DominoDrafter) -> None:
    rows = parameter_table(drafter)
    backbone = rows[0][1]
    for name, n in rows:
        print(f"  {name:<24} {n / 1e6:9.2f} M")
    if drafter.head is not None:
        head = sum(n for _, n in rows[1:])
        print(f"  {'head total':<24} {head / 1e6:9.2f} M  ({100 * head / backbone:.1f} % of the backbone)")


def describe_drafter_folder(path: str, hf_config: dict) -> None:
    """A trained drafter's shape, parameter counts and Serving section (as on its model card)."""
    config = DrafterConfig.from_hf_dict(hf_config)
    with torch.device("meta"):
        drafter = DominoDrafter(config)
    print(
        f"drafter {path}: {config.num_hidden_layers} layers, block {config.block_size}, head {config.head}, "
        f"draft vocabulary {config.draft_vocab_size or 'full'}, target_layer_ids {config.target_layer_ids}, "
        f"mask id {config.mask_token_id}, weights {hf_config.get('torch_dtype')}"
    )
    print_parameters(drafter)
    print()
    print("\n".join(serving_section(hf_config)))


def mask_token_id(spec: str, hf_config: object) -> int:
    """The MASK id a drafter for `spec` gets: Qwen3's fixed id, else one picked from the target's tokenizer
    (loaded with the config on the meta device, no weights)."""
    try:
        return default_mask_token_id(hf_config)
    except ValueError:
        return load_target(spec, device="meta").mask_token_id


@one_line_errors("domino-describe")
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="domino-describe", description=__doc__.splitlines()[0])
    parser.add_argument(
        "target", help="built-in name (smollm2, tiny-qwen3, tiny-llama), local folder or hub id; or a drafter folder"
    )
    parser.add_argument("--num-draft-layers", type=int, default=5)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--no-head", action="store_true", help="describe a plain DFlash drafter")
    parser.add_argument("--load", action="store_true", help="load the weights and draft one block")
    args = parser.parse_args(argv)
    drafter_json = drafter_config_json(args.target)
    if drafter_json is not None:
        describe_drafter_folder(args.target, drafter_json)
        return

    target = load_target(args.target) if args.load else None
    hf_config = target.config if target else load_target_config(args.target)
    mask = target.mask_token_id if target else mask_token_id(args.target, hf_config)
    config = DrafterConfig.from_target_config(
        hf_config, args.num_draft_layers, args.block_size, None if args.no_head else "domino", mask_token_id=mask
    )
    with torch.device("meta"):
        drafter = DominoDrafter(config)
    print(
        f"target {args.target}: {hf_config.model_type}, {hf_config.num_hidden_layers} layers, "
        f"hidden {hf_config.hidden_size}, vocab {hf_config.vocab_size}"
    )
    print(
        f"drafter: {config.num_hidden_layers} layers, block {config.block_size}, head {config.head}, "
        f"target_layer_ids {config.target_layer_ids}, mask id {config.mask_token_id}"
    )
    if note := repeated_layers_note(config.target_layer_ids, config.num_target_layers):
        print(f"note: {note}")
    print_parameters(drafter)
    if target is None:
        return

    torch.manual_seed(0)
    drafter = DominoDrafter(config).to(target.device, target.dtype).bind_target(target.embed_tokens, target.lm_head)
    prompt = "What is speculative decoding?"
    if target.tokenizer is not None and target.tokenizer.chat_template:
        ids = target.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
    else:
        ids = torch.randint(0, hf_config.vocab_size - 1, (1, 16))
    ids = ids.to(target.device)
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = target(ids, cache=target.new_cache(), layer_ids=config.target_layer_ids)
        t1 = time.perf_counter()
        cache = drafter.new_cache(1, ids.shape[1] + config.block_size)
        drafter.append_context(cache, out.features)
        hidden = drafter.draft_block(cache, out.logits[:, -1].argmax(-1))
        base = drafter.lm_head(drafter.draft_hidden_slice(hidden))
        t2 = time.perf_counter()
    print(
        f"prefill of {ids.shape[1]} tokens: {1e3 * (t1 - t0):.1f} ms; one draft block: {1e3 * (t2 - t1):.1f} ms "
        f"-> {base.shape[1]} untrained draft tokens, features {tuple(out.features.shape)}"
    )


if __name__ == "__main__":
    main()
