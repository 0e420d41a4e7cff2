"""Which engine runs a target's forward, and on which kernels: chosen once at load (`load_target`).

- `lean` (`lean_forward.py`): the hand-written layer loop on a static KV cache, for the Llama family;
- `hf`: Hugging Face's eager forward on transformers' cache, for every other causal LM (and where asked).
`auto` takes `lean` wherever `lean_unavailable_reason` finds nothing against it and says once why not
elsewhere. Either way the linears run on the kernels of the target's `KernelPolicy` (`prepack`: auto =
measured on this machine, true = oneDNN prepacked, false = plain), and a drafter bound to the target
follows the same policy.

Calls without a KV cache (training's and the feature cache's batched forwards) always take HF's forward:
the lean engine exists for decoding, and training backpropagates through plain linears.
"""

from __future__ import annotations

import logging
from typing import Any

from inference.kernels.linear import prepacked_count
from inference.kernels.policy import KernelPolicy
from inference.targets.adapter import TargetModel
from inference.targets.lean_forward import LeanForward, lean_unavailable_reason

ENGINES = ("auto", "lean", "hf")
log = logging.getLogger(__name__)


def install_engine(target: TargetModel, engine: str = "auto", prepack: bool | str = "auto") -> TargetModel:
    """Give `target` its engine and kernels (in place); returns it."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    policy = KernelPolicy.from_prepack(prepack, target.device, target.precision_name)
    reason = "engine=hf was asked for" if engine == "hf" else lean_unavailable_reason(target.model)
    if reason is None:
        target.lean = LeanForward(target.model, policy.linear)
        linears = target.lean.linear_modules()
    elif engine == "lean":
        raise ValueError(f"engine=lean cannot run target {target.name}: {reason} (use engine=auto or hf)")
    else:
        if engine == "auto":
            log.warning("target %s runs on Hugging Face's eager forward: %s", target.name, reason)
        linears = policy.replace_linears(target.model) if policy.mode != "plain" else []
    target.engine = "lean" if target.lean is not None else "hf"
    target.kernel_policy = policy
    target.prepacked_linears = prepacked_count(linears)
    return target


def engine_report(target: TargetModel) -> dict[str, Any]:
    """What ran the target, for results.json and model cards: engine, precision, kernel policy and, per
    linear shape, the kernel of each row bucket."""
    policy = target.kernel_policy
    linears = target.lean.linear_modules() if target.lean is not None else list(target.model.modules())
    plans: dict[str, dict[int, str]] = {}
    extra = 0
    for m in linears:
        if getattr(m, "plan", None) is not None:
            plans.setdefault(f"{m.out_features}x{m.in_features}", m.plan)
            extra += m.extra_bytes
    return {
        "engine": target.engine,
        "precision": target.precision_name,
        "kernels": policy.mode if policy is not None else "plain",
        "plans": plans,
        "extra_weight_bytes": extra,
    }
