"""Which engine runs a target's forward, and on which kernels: chosen once at load (`load_target`).

- `lean` (`lean_forward.py`): the hand-written layer loop on a static KV cache, for the Llama family;
- `graphed` (`graphed_forward.py`): the same loop with its decode steps captured as CUDA graphs at fixed
  widths (CUDA only);
- `hf`: Hugging Face's eager forward on transformers' cache, for every other causal LM (and where asked).
`auto` takes `graphed` on a GPU and `lean` on a CPU wherever `lean_unavailable_reason` finds nothing
against the model, and says once why not elsewhere. Either way the linears run on the kernels of the
target's `KernelPolicy` (`prepack`: auto = measured on this machine, true = oneDNN prepacked, false =
plain), and a drafter bound to the target follows the same policy. Under `auto` on a CPU the lean
engine's attention layout is measured too (`kernels/attention.py`).

Calls without a KV cache (training's and the feature cache's batched forwards) always take HF's forward:
the lean engine exists for decoding, and training backpropagates through plain linears.
"""

from __future__ import annotations

import logging
from typing import Any

from inference.kernels.attention import measure_folding
from inference.kernels.linear import prepacked_count
from inference.kernels.policy import KernelPolicy
from inference.targets.adapter import TargetModel
from inference.targets.graphed_forward import GraphedForward
from inference.targets.lean_forward import LeanForward, lean_unavailable_reason

ENGINES = ("auto", "lean", "graphed", "hf")
log = logging.getLogger(__name__)


def install_engine(target: TargetModel, engine: str = "auto", prepack: bool | str = "auto") -> TargetModel:
    """Give `target` its engine and kernels (in place); returns it."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    policy = KernelPolicy.from_prepack(prepack, target.device, target.precision_name)
    reason = "engine=hf was asked for" if engine == "hf" else lean_unavailable_reason(target.model)
    if engine == "graphed" and target.device.type != "cuda":
        raise ValueError(f"engine=graphed captures CUDA graphs; target {target.name} is on {target.device} (use lean)")
    if reason is None:
        lean = LeanForward(target.model, policy.linear)
        if policy.mode == "auto":
            weight = lean.lm_head.weight
            lean.folded_queries = measure_folding(
                lean.num_heads, lean.kv_heads, lean.head_dim, weight.dtype, weight.device
            )
        graphed = engine == "graphed" or (engine == "auto" and target.device.type == "cuda")
        target.lean = GraphedForward(lean) if graphed else lean
        linears = lean.linear_modules()
    elif engine in ("lean", "graphed"):
        raise ValueError(f"engine={engine} cannot run target {target.name}: {reason} (use engine=auto or hf)")
    else:
        if engine == "auto":
            log.warning("target %s runs on Hugging Face's eager forward: %s", target.name, reason)
        linears = policy.replace_linears(target.model) if policy.mode != "plain" else []
    target.engine = "hf" if target.lean is None else "graphed" if isinstance(target.lean, GraphedForward) else "lean"
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
    graphs = {}
    if isinstance(target.lean, GraphedForward):
        graphs = {"captured": target.lean.captured, "capture_seconds": round(target.lean.capture_seconds, 3)}
    return {
        "engine": target.engine,
        **({"graphs": graphs} if graphs else {}),
        "precision": target.precision_name,
        "kernels": policy.mode if policy is not None else "plain",
        "plans": plans,
        "extra_weight_bytes": extra,
        "folded_attention_queries": sorted(getattr(target.lean, "folded_queries", ())),
    }
