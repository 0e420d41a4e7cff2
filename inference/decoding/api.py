"""The decoding entry points users and `domino-decode` share: `build_decoder` and `generate`.

What each method is lives in the method table (`methods.py`); this module maps each family to the
decoder that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from inference.decoding.ar import ARDecoder
from inference.decoding.chain.decoder import ChainDecoder
from inference.decoding.generation import Decoder, Generation
from inference.decoding.methods import check_options
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.sampling import SamplingParams
from inference.decoding.tree.decoder import TreeDecoder
from inference.drafter import DominoDrafter
from inference.targets.adapter import TargetModel

Prompt = str | list[dict[str, str]] | list[int] | torch.Tensor

# (method, target, drafter, options, tree options) -> the decoder, per family of the method table
_FAMILIES: dict[str, Callable[..., Decoder]] = {
    "ar": lambda method, target, drafter, options, tree: ARDecoder(target, options),
    "chain": lambda method, target, drafter, options, tree: ChainDecoder(target, drafter, method, options),
    "tree": lambda method, target, drafter, options, tree: TreeDecoder(target, drafter, method, options, tree),
}


def build_decoder(
    method: str,
    target: TargetModel,
    drafter: DominoDrafter | None = None,
    options: DecodeOptions | None = None,
    tree: TreeOptions | None = None,
) -> Decoder:
    """A decoder for `method` (see `DECODING_METHODS`): `options` for every method (sampling, verify rule,
    stop tokens, context limit, stage sync, CUDA graphs), `tree` for `ddtree` / `dominotree`."""
    options = options or DecodeOptions()
    spec = check_options(method, options)  # the decoders check the drafter against the method
    return _FAMILIES[spec.family](method, target, drafter, options, tree)


def prompt_ids(target: TargetModel, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: a string (one user turn) or chat messages go through the chat template;
    ids pass through."""
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if isinstance(prompt, torch.Tensor):
        return prompt.reshape(-1).tolist()
    if prompt and isinstance(prompt[0], dict):
        return target.chat_ids(prompt, add_generation_prompt=True)
    return [int(t) for t in prompt]


def generate(
    target: TargetModel,
    prompt: Prompt,
    drafter: DominoDrafter | None = None,
    method: str | None = None,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    verify: str = "match",
    seed: int | None = None,
    stop_token_ids: Iterable[int] | None = None,
) -> Generation:
    """Generate one response, speculatively when a drafter is given.

    `method` defaults to `domino` for a drafter with a head, `dflash` for one without, `ar` without a
    drafter. For many prompts build the decoder once with `build_decoder` and call its `generate`.
    """
    if method is None:
        method = "ar" if drafter is None else ("domino" if drafter.head is not None else "dflash")
    options = DecodeOptions(SamplingParams(temperature, top_k, top_p), verify, stop_token_ids)
    decoder = build_decoder(method, target, drafter, options)
    generator = None if seed is None else torch.Generator(target.device).manual_seed(seed)
    result = decoder.generate(prompt_ids(target, prompt), max_new_tokens, generator)
    if target.tokenizer is not None:
        result.text = target.tokenizer.decode(result.tokens, skip_special_tokens=True)
    return result
