"""The decoders of a decoding run, one per method, and the widest window any of them verifies."""

from __future__ import annotations

from typing import Any

from inference.decoding.api import build_decoder
from inference.decoding.speculative import SpeculativeDecoder
from inference.drafter import DominoDrafter
from inference.eval.options import MethodOptions
from inference.targets.adapter import TargetModel


def build_decoders(
    methods: list[str],
    target: TargetModel,
    drafters: dict[str, DominoDrafter],
    paths: dict[str, str],
    options: MethodOptions,
) -> dict[str, Any]:
    """{method: decoder}, each with the drafter of its folder in `paths` (none for `ar`)."""
    return {m: build_decoder(m, target, drafters.get(paths.get(m)), options.of(m), options.tree) for m in methods}


def verify_window(decoders: dict[str, Any]) -> int:
    """The widest window a method of the run verifies at once (a chain its block, a tree its largest budget
    + 1): the noise floor of the lossless check is measured over that many tokens."""
    return max((d.max_window() for d in decoders.values() if isinstance(d, SpeculativeDecoder)), default=16)
