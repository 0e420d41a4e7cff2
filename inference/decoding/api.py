"""The decoding entry points users and `domino-decode` share: `build_decoder` and `generate`.

`DECODING_METHODS` is the one method table: each name maps to a `MethodSpec` (its family, the verify
rules it accepts, whether it is a no-head baseline, and the factory that builds it). A new method
registers itself here and is then available to the Python API and `domino-decode` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from inference.decoding.ar import ARDecoder
from inference.decoding.chain.decoder import ChainDecoder
from inference.decoding.chain.verify import VERIFY_RULES
from inference.decoding.generation import Decoder, Generation
from inference.decoding.sampling import SamplingParams
from inference.decoding.tree.decoder import TreeDecoder
from inference.decoding.tree.verify import TREE_VERIFY_RULES
from inference.drafter import DominoDrafter
from inference.targets.adapter import TargetModel

Prompt = str | list[dict[str, str]] | list[int] | torch.Tensor


Options = dict[str, Any]  # method options: cuda_graph (chains, trees); budget, top_m, node_topk (trees)


def _ar(target: TargetModel, drafter: DominoDrafter | None, verify: str, options: Options, **common: Any) -> Decoder:
    return ARDecoder(target, **common)


def _needs_drafter(method: str, drafter: DominoDrafter | None) -> DominoDrafter:
    if drafter is None:
        raise ValueError(f"method {method!r} needs a drafter")
    return drafter


def _chain(use_head: bool) -> Callable[..., Decoder]:
    def build(target: TargetModel, drafter: DominoDrafter | None, verify: str, options: Options, **common: Any):
        drafter = _needs_drafter("domino" if use_head else "dflash", drafter)
        return ChainDecoder(
            target, drafter, use_head, verify=verify, cuda_graph=options.get("cuda_graph", "auto"), **common
        )

    return build


def _tree(method: str) -> Callable[..., Decoder]:
    def build(target: TargetModel, drafter: DominoDrafter | None, verify: str, options: Options, **common: Any):
        return TreeDecoder(target, _needs_drafter(method, drafter), method, verify=verify, **options, **common)

    return build


@dataclass(frozen=True)
class MethodSpec:
    """One decoding method as the API and `domino-decode` see it."""

    family: str  # "ar", "chain" or "tree": which decoder runs it (and which `verify` key the CLI reads)
    verify_rules: tuple[str, ...]  # accepted `verify` values: chains verify position by position, trees walk
    baseline: bool  # reads only the backbone's base logits, so it may draft with `baseline_drafter_path`
    build: Callable[..., Decoder]  # (target, drafter, verify, options, **common) -> the decoder


DECODING_METHODS: dict[str, MethodSpec] = {
    "ar": MethodSpec("ar", VERIFY_RULES, baseline=False, build=_ar),
    "dflash": MethodSpec("chain", VERIFY_RULES, baseline=True, build=_chain(False)),
    "domino": MethodSpec("chain", VERIFY_RULES, baseline=False, build=_chain(True)),
    "ddtree": MethodSpec("tree", TREE_VERIFY_RULES, baseline=True, build=_tree("ddtree")),
    "dominotree": MethodSpec("tree", TREE_VERIFY_RULES, baseline=False, build=_tree("dominotree")),
}


def build_decoder(
    method: str,
    target: TargetModel,
    drafter: DominoDrafter | None = None,
    sampling: SamplingParams | None = None,
    verify: str = "match",
    stop_token_ids: Iterable[int] | None = None,
    max_context: int | None = None,
    sync_stages: bool = True,
    tree: Options | None = None,
    cuda_graph: str = "auto",
) -> Decoder:
    """A decoder for `method` (see `DECODING_METHODS`).

    `verify`: `match` for any method, `rejection` for chains, `residual` for trees; `tree`: the tree
    methods' options (`budget`, `top_m`, `node_topk`); `cuda_graph`: auto | on | off (the domino chain's
    rollout and DominoTree's expansions replay CUDA graphs on GPUs).
    """
    if method not in DECODING_METHODS:
        raise ValueError(f"unknown decoding method {method!r}; choose from {', '.join(DECODING_METHODS)}")
    spec = DECODING_METHODS[method]
    if verify not in spec.verify_rules:
        raise ValueError(f"unknown verify rule {verify!r} for {method}; choose one of {', '.join(spec.verify_rules)}")
    return spec.build(
        target,
        drafter,
        verify,
        {**(tree or {}), "cuda_graph": cuda_graph} if spec.family == "tree" else {"cuda_graph": cuda_graph},
        sampling=sampling,
        stop_token_ids=stop_token_ids,
        max_context=max_context,
        sync_stages=sync_stages,
    )


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
    sampling = SamplingParams(temperature, top_k, top_p)
    decoder = build_decoder(method, target, drafter, sampling, verify, stop_token_ids)
    generator = None if seed is None else torch.Generator(target.device).manual_seed(seed)
    result = decoder.generate(prompt_ids(target, prompt), max_new_tokens, generator)
    if target.tokenizer is not None:
        result.text = target.tokenizer.decode(result.tokens, skip_special_tokens=True)
    return result
