"""`drafter.init=target`: start the draft layers as copies of the target's top layers.

A drafter's layers have the target's width, so the target's last n decoder layers fit them (the
drafter's MLP width and head counts must equal the target's). What is copied:
- draft layer i <- target layer L - n + i (attention and MLP projections, both layer norms; q/k norms
  when the target has them, else they stay at 1);
- the final `norm` <- the target's final norm, so `lm_head(norm(h))` reads the stream as the target does;
- `fc` <- a pass-through of the last feature layer (zeros for the others) and `hidden_norm` <- the input
  norm of the first copied layer: the context keys / values of draft layer 0 are then those target
  layer L - n would compute from the last feature layer.
The head starts randomly as always. Public recipes start from random weights (`drafter.init=random`).
"""

from __future__ import annotations

import torch
from torch import nn

from inference.drafter import DominoDrafter
from inference.targets.adapter import TargetModel

INITS = ("random", "target")
_LAYER_PARAMS = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
)
_OPTIONAL_PARAMS = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")


def _final_norm(target: TargetModel) -> nn.Module:
    inner = getattr(target.model, "model", None)
    norm = getattr(inner, "norm", None)
    if norm is None or not hasattr(norm, "weight"):
        raise ValueError(f"cannot find the final norm of {type(target.model).__name__} (expected model.model.norm)")
    return norm


@torch.no_grad()
def init_from_target(drafter: DominoDrafter, target: TargetModel) -> None:
    """Copy the target's top layers, final norm and a pass-through fc into `drafter` (see the module doc).

    Raises ValueError naming every parameter whose shape does not match (nothing is copied then).
    """
    cfg = drafter.config
    n, num_layers = cfg.num_hidden_layers, target.num_layers
    if n > num_layers:
        raise ValueError(f"drafter.init=target needs at most {num_layers} draft layers (the target's), got {n}")
    pairs: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    for i, layer in enumerate(drafter.backbone.layers):
        source_index = num_layers - n + i
        src = dict(target.layers[source_index].named_parameters())
        dst = dict(layer.named_parameters())
        for name in _LAYER_PARAMS + _OPTIONAL_PARAMS:
            if name not in src:
                if name in _OPTIONAL_PARAMS:
                    continue
                raise ValueError(f"target layer {source_index} has no parameter {name}: cannot copy it")
            pairs.append((f"layers.{i}.{name} <- target layer {source_index}", dst[name], src[name]))
    pairs.append(("norm <- the target's final norm", drafter.backbone.norm.weight, _final_norm(target).weight))
    first = dict(target.layers[num_layers - n].named_parameters())["input_layernorm.weight"]
    pairs.append(("hidden_norm <- the first copied layer's input norm", drafter.backbone.hidden_norm.weight, first))
    bad = [f"{what}: {tuple(d.shape)} vs {tuple(s.shape)}" for what, d, s in pairs if d.shape != s.shape]
    if bad:
        raise ValueError(
            "drafter.init=target: the drafter's shapes differ from the target's ("
            + "; ".join(bad)
            + "); use the target's intermediate_size and heads, or drafter.init=random"
        )
    for _, d, s in pairs:
        d.copy_(s.to(d.dtype))
    h = cfg.hidden_size
    fc = drafter.backbone.fc.weight
    fc.zero_()
    fc[:, -h:] = torch.eye(h, dtype=fc.dtype, device=fc.device)  # the last feature layer, unchanged
