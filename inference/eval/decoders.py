"""The decoders of a decoding run, one per arm, and the widest window any of them verifies."""

from __future__ import annotations

from typing import Any

from inference.decoding.api import build_decoder
from inference.decoding.speculative import SpeculativeDecoder
from inference.drafter import DominoDrafter
from inference.eval.arms import arm_method
from inference.eval.options import MethodOptions
from inference.targets.adapter import TargetModel


def build_decoders(
    methods: list[str],
    target: TargetModel,
    drafters: dict[str, DominoDrafter],
    paths: dict[str, str],
    options: MethodOptions,
) -> dict[str, Any]:
    """{arm: decoder}, each with the drafter of its folder in `paths` (none for `ar`) and the arm's options
    (its own draft size where it names one: `inference.eval.arms`)."""
    return {m: build_decoder(arm_method(m), target, drafters.get(paths.get(m)), *options.of(m)) for m in methods}


def verify_window(decoders: dict[str, Any]) -> int:
    """The widest window a method of the run verifies at once (a chain its block, a tree its largest budget
    + 1): the noise floor of the lossless check is measured over that many tokens."""
    return max((d.max_window() for d in decoders.values() if isinstance(d, SpeculativeDecoder)), default=16)
