"""The target of a decoding run, in two steps: its device and precision decided first (from its config on
the `meta` device, no weights), so that the drafters are checked before the target loads and load straight
into them; then the target itself, in that same precision, with the drafters bound to it."""

from __future__ import annotations

from dataclasses import dataclass

import hydra
from omegaconf import DictConfig

from inference.device import default_device
from inference.drafter import DominoDrafter
from inference.kernels.choice import PrecisionChoice, resolve_precision
from inference.targets.adapter import TargetModel
from inference.targets.lean_forward import forward_linears
from inference.targets.loader import load_target


@dataclass(frozen=True)
class TargetPlan:
    """Where and in what the target will run, as `load_target` will take them, and its weightless copy."""

    device: str
    described: TargetModel  # on `meta`: config, tokenizer, chat template
    precision: PrecisionChoice


def plan_target(cfg: DictConfig) -> TargetPlan:
    """The device (`target.device`, else the default) and precision of `cfg.target`, without its weights."""
    device = cfg.target.get("device") or default_device()
    described = load_target(cfg.target.spec, device="meta", mask_token_id=cfg.target.get("mask_token_id"))
    precision = resolve_precision(cfg.target.get("dtype"), device, forward_linears(described.config))
    return TargetPlan(device, described, precision)


def load_planned_target(cfg: DictConfig, plan: TargetPlan, drafters: dict[str, DominoDrafter]) -> TargetModel:
    """`cfg.target` loaded in the planned precision, with `drafters` bound to its embedding and LM head."""
    target = hydra.utils.instantiate(cfg.target, dtype=plan.precision.name)
    target.precision = plan.precision  # with how it was chosen and the measured scores
    for drafter in drafters.values():
        drafter.bind_target(target.embed_tokens, target.lm_head)
    return target
