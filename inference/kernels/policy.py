"""`KernelPolicy`: how a model's linears pick their kernels, given once at load and shared by the target
and the drafter bound to it.

- `auto`: by measurement, from this machine's kernel table (`table.py`; shapes it lacks are timed first);
- `onednn`: every row count on oneDNN's prepacked layout (`prepack=true`; an error where it cannot run);
- `plain`: `F.linear` on the weight as stored (`prepack=false`, training, or a device that is not a CPU).

`weights_bf16` marks the `bf16-weights` precision (fp32 compute on weights whose values are bf16): its fp32
linears may then also run on the `bf16w` kernel, which stores them in bf16.
"""

from __future__ import annotations

import torch
from torch import nn

from inference.kernels.linear import ROW_BUCKETS, MeasuredLinear, kernel_unavailable_reason
from inference.kernels.table import KernelTable
from inference.precision import dtype_name

POLICY_MODES = ("auto", "onednn", "plain")


class KernelPolicy:
    def __init__(self, mode: str, table: KernelTable | None = None, weights_bf16: bool = False) -> None:
        if mode not in POLICY_MODES:
            raise ValueError(f"kernel policy must be one of {', '.join(POLICY_MODES)}, got {mode!r}")
        if mode == "auto" and table is None:
            table = KernelTable.load()
        self.mode, self.table, self.weights_bf16 = mode, table, weights_bf16

    @classmethod
    def from_prepack(
        cls, prepack: bool | str, device: torch.device | str, precision: str, table: KernelTable | None = None
    ) -> KernelPolicy:
        """The policy a `prepack` switch asks for: auto = measured (plain off the CPU), true = oneDNN
        (ValueError saying why where it cannot run), false = plain."""
        if prepack not in (True, False, "auto"):
            raise ValueError(f"prepack must be auto, true or false, got {prepack!r}")
        weights_bf16 = precision == "bf16-weights"
        if prepack is True:
            reason = kernel_unavailable_reason("onednn", precision, device)
            if reason is not None:
                raise ValueError(f"prepack=true is not possible here: {reason}")
            return cls("onednn", weights_bf16=weights_bf16)
        if prepack is False or torch.device(device).type != "cpu":
            return cls("plain", weights_bf16=weights_bf16)
        return cls("auto", table, weights_bf16)

    def precision_of(self, weight: torch.Tensor) -> str:
        """The precision a linear on `weight` computes in under this policy."""
        return "bf16-weights" if self.weights_bf16 and weight.dtype == torch.float32 else dtype_name(weight.dtype)

    def plan(self, weight: torch.Tensor, bias: torch.Tensor | None) -> dict[int, str]:
        if self.mode != "auto":
            return dict.fromkeys(ROW_BUCKETS, self.mode)
        shape, has_bias, precision = (weight.shape[0], weight.shape[1]), bias is not None, self.precision_of(weight)
        if not self.table.has(precision, shape, has_bias):
            self.table.measure(precision, [(shape, has_bias)])
            self.table.save()
        return self.table.plan(precision, shape, has_bias)

    def measure(self, precision: str, shapes: list[tuple[tuple[int, int], bool]]) -> None:
        """Time every shape the table lacks at once (one save), before the linears are built."""
        if self.mode == "auto" and self.table.measure(precision, shapes):
            self.table.save()

    def linear(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> MeasuredLinear:
        """An inference linear on `weight` [out, in] (kept, shared) on the kernels this policy picks."""
        module = MeasuredLinear(weight, bias, self.plan(weight, bias))
        module.policy = self
        return module

    def replace_linears(self, model: nn.Module) -> list[MeasuredLinear]:
        """Every `nn.Linear` of `model` becomes a `MeasuredLinear` on the same weight; returns them."""
        names = [n for n, m in model.named_modules() if type(m) is nn.Linear]
        self.measure(
            self.precision_of(next(model.parameters())),
            [((m.out_features, m.in_features), m.bias is not None) for m in map(model.get_submodule, names)],
        )
        replaced = []
        for name in names:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            linear = getattr(parent, child)
            replaced.append(self.linear(linear.weight, linear.bias))
            setattr(parent, child, replaced[-1])
        return replaced

    def describe(self) -> str:
        return {"auto": "measured per shape", "onednn": "oneDNN prepacked", "plain": "plain F.linear"}[self.mode]
