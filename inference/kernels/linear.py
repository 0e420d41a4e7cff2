"""The CPU linear kernels decoding can choose from, and `MeasuredLinear`, which runs each row count on the
kernel measured fastest for it (`inference.kernels.table`).

A decode step multiplies 1 row by every weight; a verify multiplies 4-32. Which kernel is fastest depends
on the machine, the dtype, the shape and the row count (AMD EPYC, AVX2, fp32, 2 threads: MKL's `F.linear`
takes 10.6 ms on SmolLM2's 576 -> 49,152 lm_head at one row and 26 ms at four; the same weight reordered
once for oneDNN 5.2 and 7.9 ms; on the 576 x 576 shapes at one row the plain call wins). So no kernel is
chosen by rule. The candidates:

- `plain`: `F.linear` on the weight as stored (MKL in fp32; oneDNN with a per-call reorder in bf16);
- `transposed`: `x @ W^T` on a contiguous copy of `W^T` (MKL's other operand order, faster for some shapes);
- `onednn`: the weight reordered once into oneDNN's blocked layout (`torch.ops.mkldnn`), fp32 or bf16;
- `bf16w`: the weight stored in bf16, inputs and sums in fp32 (`native.py`), for the `bf16-weights`
  precision only.

A kernel serves a precision (`PRECISIONS`): `float32` and `bfloat16` compute in that dtype; `bf16-weights`
computes in fp32 on weights whose values are bf16 (stored as fp32 for the first three kernels, as bf16
for `bf16w`). Within a precision the kernels' results differ only in rounding (`tests/inference/kernels`
checks each against `F.linear`). Inference only: none keeps a gradient path.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

KERNELS = ("plain", "transposed", "onednn", "bf16w")
PRECISIONS = ("float32", "bfloat16", "bf16-weights")
# The row counts a plan is measured at: a call runs on the plan of the smallest bucket >= its rows (the
# largest bucket beyond them). 1 = a decode step; 2-64 = verify windows; 256 = a prefill chunk.
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 256)
# The oneDNN batch-size hint the weights are packed for (>= 2 gives the layout a plain bf16 call reorders to).
ONEDNN_HINT = 16

Kernel = Callable[[torch.Tensor], torch.Tensor]


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype a precision's inputs and outputs are in."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (one of {', '.join(PRECISIONS)})")
    return torch.bfloat16 if precision == "bfloat16" else torch.float32


def kernel_unavailable_reason(kernel: str, precision: str, device: torch.device | str = "cpu") -> str | None:
    """Why `kernel` cannot run a linear of `precision` on `device`, or None when it can."""
    if kernel not in KERNELS:
        return f"unknown kernel {kernel!r} (one of {', '.join(KERNELS)})"
    dtype = compute_dtype(precision)
    if kernel == "plain":
        return None
    if torch.device(device).type != "cpu":
        return f"{kernel} is a CPU kernel"
    if kernel == "bf16w":
        if precision != "bf16-weights":
            return f"bf16w rounds weights to bf16: it serves the bf16-weights precision, not {precision}"
        from inference.kernels.native import bf16w_unavailable_reason

        return bf16w_unavailable_reason()
    if kernel == "onednn":
        ops = torch.ops.mkldnn
        if not torch.backends.mkldnn.is_available():
            return "this PyTorch build has no oneDNN"
        if not (hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise")):
            return "this PyTorch build lacks torch.ops.mkldnn._reorder_linear_weight / _linear_pointwise"
        if dtype == torch.bfloat16 and not ops._is_mkldnn_bf16_supported():
            return "oneDNN has no bf16 kernels for this CPU"
        if dtype not in (torch.float32, torch.bfloat16):
            return f"oneDNN linears take fp32 or bf16, not {dtype}"
    return None


def available_kernels(precision: str, device: torch.device | str = "cpu") -> tuple[str, ...]:
    return tuple(k for k in KERNELS if kernel_unavailable_reason(k, precision, device) is None)


def build_layout(kernel: str, weight: torch.Tensor) -> torch.Tensor:
    """The stored form of `weight` [out, in] that `kernel` reads (the weight itself for `plain`)."""
    weight = weight.detach()
    if kernel == "plain":
        return weight
    if kernel == "transposed":
        return weight.t().contiguous()
    if kernel == "onednn":
        return torch.ops.mkldnn._reorder_linear_weight(weight, ONEDNN_HINT)
    if kernel == "bf16w":
        return weight.to(torch.bfloat16).contiguous()
    raise ValueError(f"unknown kernel {kernel!r}")


def bind_kernel(kernel: str, layout: torch.Tensor, bias: torch.Tensor | None) -> Kernel:
    """`x -> x W^T + b` on the stored `layout` of `kernel`."""
    if kernel == "plain":
        return lambda x: F.linear(x, layout, bias)
    if kernel == "transposed":
        if bias is None:
            return lambda x: torch.matmul(x, layout)
        return lambda x: torch.addmm(bias, x.reshape(-1, x.shape[-1]), layout).view(*x.shape[:-1], -1)
    if kernel == "onednn":
        return lambda x: torch.ops.mkldnn._linear_pointwise(x, layout, bias, "none", [], "")
    if kernel == "bf16w":
        from inference.kernels.native import bf16w_linear

        return lambda x: bf16w_linear(x, layout, bias)
    raise ValueError(f"unknown kernel {kernel!r}")


def bucket_of(rows: int) -> int:
    """The row bucket whose plan runs a call of `rows` rows."""
    return ROW_BUCKETS[min(bisect.bisect_left(ROW_BUCKETS, rows), len(ROW_BUCKETS) - 1)]


class MeasuredLinear(nn.Module):
    """An inference-only linear that runs each row bucket on the kernel its `plan` names.

    `plan` maps every bucket of `ROW_BUCKETS` to a kernel; only the layouts the plan uses are stored, and
    `weight` (the plain weight, shared with the module it came from) is kept whatever the plan: the HF
    model and the drafters still read it."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, plan: dict[int, str]) -> None:
        super().__init__()
        missing = [b for b in ROW_BUCKETS if b not in plan]
        if missing:
            raise ValueError(f"kernel plan lacks row buckets {missing}")
        self.out_features, self.in_features = weight.shape
        self.register_buffer("weight", weight.detach(), persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach(), persistent=False)
        self.plan = {b: plan[b] for b in ROW_BUCKETS}
        layouts = {k: build_layout(k, self.weight) for k in dict.fromkeys(self.plan.values())}
        self._kernels = {k: bind_kernel(k, layout, self.bias) for k, layout in layouts.items()}
        self.extra_bytes = sum(_nbytes(v) for k, v in layouts.items() if k != "plain")
        self.policy = None  # the KernelPolicy that built it, which a drafter bound to it follows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        return self._kernels[self.plan[bucket_of(rows)]](x)

    def extra_repr(self) -> str:
        runs = ", ".join(f"{b}:{k}" for b, k in self.plan.items())
        return f"in_features={self.in_features}, out_features={self.out_features}, plan={{{runs}}}"


def prepacked_count(modules: list[nn.Module]) -> int:
    """How many of `modules` hold a oneDNN-prepacked layout (for reports)."""
    return sum("onednn" in getattr(m, "plan", {}).values() for m in modules)


def _nbytes(t: torch.Tensor) -> int:
    """Bytes of a stored layout (an opaque oneDNN tensor has no storage to ask)."""
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()
