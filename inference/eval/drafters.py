"""The drafters of a decoding run: which folder each method drafts with, loaded once per folder straight
into the target's device and precision and checked against their methods before the target loads."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from inference.decoding.methods import DECODING_METHODS, check_drafter
from inference.drafter import DominoDrafter
from inference.drafter.training_data import chat_template_warning
from inference.eval.arms import arm_method
from inference.eval.target import TargetPlan
from inference.targets.adapter import TargetModel

log = logging.getLogger("domino-decode")


def drafter_paths(cfg: DictConfig, methods: list[str]) -> dict[str, str]:
    """The drafter folder each drafting arm (`inference.eval.arms`) uses: `baseline_drafter_path` (when
    set) for the no-head baselines (dflash, ddtree), `drafter_path` for the rest."""
    paths = {}
    for m in methods:
        spec = DECODING_METHODS[arm_method(m)]
        if not spec.needs_drafter:
            continue
        baseline = spec.baseline and cfg.baseline_drafter_path
        path = cfg.baseline_drafter_path if baseline else cfg.drafter_path
        if not path:
            raise ValueError(f"method {m!r} needs a drafter: set drafter_path=PATH")
        paths[m] = str(path)
    return paths


def _mask_token_id(target: TargetModel) -> int | None:
    """The target's MASK id for drafter configs that leave it out; None when its tokenizer offers none
    (a drafter config must then name its own, and loading says so)."""
    try:
        return target.mask_token_id
    except ValueError:
        return None


def load_drafters(paths: dict[str, str], plan: TargetPlan) -> dict[str, DominoDrafter]:
    """{folder: drafter}, one per folder of `paths` ({method: folder}), each refused by the checkpoint
    validator or its method before any work; built on the planned target's device and precision (casting
    a built module would also round its fp32 RoPE table)."""
    described, precision = plan.described, plan.precision
    drafters: dict[str, DominoDrafter] = {}
    for path in dict.fromkeys(paths.values()):
        drafters[path] = DominoDrafter.from_pretrained(
            path, described.config, device=plan.device, dtype=precision.dtype, mask_token_id=_mask_token_id(described)
        )
    for m, path in paths.items():
        check_drafter(arm_method(m), drafters[path])
    return drafters


def warn_on_other_chat_templates(paths: dict[str, str], target: TargetModel) -> list[str]:
    """Logs (and returns) one line per drafter folder trained on text rendered with another chat template
    than `target` renders the prompts with: outputs stay the target's, but acceptance collapses."""
    warnings = [
        w
        for path in dict.fromkeys(paths.values())
        if (w := chat_template_warning(path, target.tokenizer, target.chat_template_kwargs))
    ]
    for w in warnings:
        log.warning(w)
    return warnings
