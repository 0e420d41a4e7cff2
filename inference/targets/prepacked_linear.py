"""Prepacked oneDNN weights for a bf16 target on a CPU: every `nn.Linear` of the HF model becomes a
`PrepackedLinear` that holds its weight already reordered into oneDNN's blocked layout.

Why: a plain bf16 `F.linear` on a CPU goes through oneDNN, which reorders the whole weight into its
blocked layout on every call. For SmolLM2-135M that reorder is most of a decode step (one-token forward
after a 200-token prompt: 77 % of the time in `aten::mm`, 211 linears at ~120 us each). Reordering once
(`torch.ops.mkldnn._reorder_linear_weight`) and calling `torch.ops.mkldnn._linear_pointwise` halves a
1536 x 576 linear at 1-32 rows and makes the bf16 forward the fastest plain decoding on such a CPU.

Numerics: with a batch-size hint of at least 2 the packed layout is the one the plain call reorders to,
so the outputs are bit-identical to a 2-D `F.linear` for 1-256 rows on SmolLM2's shapes (2 threads; with
one thread for every row count tried), and a whole SmolLM2 forward (200-token prefill, then 1-32 tokens:
logits and features) is bit-identical to the plain one. Hint 1 picks another layout: equal up to 32 rows,
an ulp off here and there from 33 rows on, so a prefill (and then every later logit, by up to 0.5) differs.
(Plain `F.linear` itself may round differently on a 3-D input with an unusual batch stride, e.g. a slice
of a longer sequence; the packed op does not.) Longer prefills (~300+ rows at 2 threads)
may round differently from the plain call whatever the hint; decoding stays lossless regardless, as AR
and verification run the same packed target (`inference.eval.divergence`).

Memory: the packed copy replaces the weight of every linear (same bytes for shapes that are multiples of
oneDNN's blocks), except the lm_head, which keeps its plain weight too: it is tied to the embedding in
SmolLM2 / Qwen3-4B, and drafters read `lm_head.weight` (draft-vocabulary rows). The cost is one extra
lm_head-sized copy (V x H bf16: 57 MB for SmolLM2-135M).

Inference only: the op has no backward, and the plain weights of the other linears are gone, so training
(which backpropagates through the lm_head and copies target layers) loads its target with `prepack=False`.

A drafter bound to a prepacked target in the same dtype is packed the same way
(`DominoDrafter.bind_target`), keeping its plain weights (a few MB), and its
draft-vocabulary rows of the lm_head are packed once with them (`DraftVocab.logits`): the same
bit-identity, so a packed drafter drafts exactly what the plain one does.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from inference.precision import AUTO

log = logging.getLogger(__name__)

# The oneDNN batch-size hint the weights are packed for. Any hint >= 2 gives the layout plain bf16 calls
# use (bit-identical results) and the same speed for 1-64 rows within noise on SmolLM2's shapes; hint 1 is
# up to ~10 % faster on the lm_head at 1-4 rows but not bit-identical from ~33 rows on (see the module doc).
BATCH_SIZE_HINT = 16


def prepack_unavailable_reason(device: torch.device | str, dtype: torch.dtype) -> str | None:
    """Why a target on `device` in `dtype` cannot be prepacked, or None when it can (CPU, bf16, oneDNN ops)."""
    if torch.device(device).type != "cpu":
        return f"prepacked weights are a CPU feature (device {torch.device(device).type})"
    if dtype != torch.bfloat16:
        return f"prepacked weights are bf16 only (dtype {str(dtype).removeprefix('torch.')}: fp32 runs on MKL)"
    if not torch.backends.mkldnn.is_available():
        return "this PyTorch build has no oneDNN (mkldnn)"
    ops = torch.ops.mkldnn
    if not (hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise")):
        return "this PyTorch build lacks torch.ops.mkldnn._reorder_linear_weight / _linear_pointwise"
    if not ops._is_mkldnn_bf16_supported():
        return "oneDNN has no bf16 kernels for this CPU"
    return None


def resolve_prepack(prepack: bool | str, device: torch.device | str, dtype: torch.dtype) -> bool:
    """The `prepack` switch as a decision: `auto` = wherever it can be done (CPU + bf16 + the oneDNN ops),
    False = never, True = always (ValueError saying why where it cannot be)."""
    if prepack not in (True, False, AUTO):
        raise ValueError(f"prepack must be auto, true or false, got {prepack!r}")
    if prepack is False:
        return False
    reason = prepack_unavailable_reason(device, dtype)
    if reason is None:
        return True
    if prepack is True:
        raise ValueError(f"prepack=true is not possible here: {reason}")
    if torch.device(device).type == "cpu" and dtype == torch.bfloat16:  # would have helped: say why not
        log.info("target linears stay plain nn.Linear: %s", reason)
    return False


class PrepackedLinear(nn.Module):
    """An inference-only `nn.Linear` whose weight is stored once in oneDNN's blocked layout.

    `weight` is the plain weight where it is kept (`keep_weight`: the lm_head), else None: the packed
    copy (`packed`, an opaque mkldnn tensor, not in the state dict) is then the only one."""

    def __init__(self, linear: nn.Linear, keep_weight: bool = False, batch_size_hint: int = BATCH_SIZE_HINT) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.batch_size_hint = batch_size_hint
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), batch_size_hint)
        self.register_parameter("weight", linear.weight if keep_weight else None)
        self.register_parameter("bias", linear.bias)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> PrepackedLinear:
        """A packed linear on a weight [out, in] that belongs to no module (e.g. rows gathered from an
        lm_head); only the packed copy is kept."""
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
        linear.weight = nn.Parameter(weight.detach(), requires_grad=False)
        linear.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)
        return cls(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(
                "PrepackedLinear is inference-only (the oneDNN op has no backward): load the target with prepack=False"
            )
        if x.dtype != self.packed.dtype or x.device.type != "cpu":
            raise RuntimeError(f"PrepackedLinear takes CPU {self.packed.dtype} inputs, got {x.device.type} {x.dtype}")
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"batch_size_hint={self.batch_size_hint}, plain_weight_kept={self.weight is not None}"
        )


def prepack_linears(model: nn.Module, batch_size_hint: int = BATCH_SIZE_HINT, keep_weights: bool = False) -> int:
    """Replace every `nn.Linear` of `model` by a `PrepackedLinear` (in place); returns how many.

    The output embeddings (lm_head) keep their plain weight, which stays tied to the input embedding
    where the model ties them; the other linears keep only the packed copy unless `keep_weights` (a
    drafter, whose code also reads some weights directly: its dtype, correction rows of tree candidates)."""
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = [name for name, m in model.named_modules() if type(m) is nn.Linear]
    for name in names:  # one at a time: each plain weight is freed before the next is packed (peak + 1 layer)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        linear = getattr(parent, child)
        keep = keep_weights or linear is lm_head
        setattr(parent, child, PrepackedLinear(linear, keep_weight=keep, batch_size_hint=batch_size_hint))
        del linear
    return len(names)
