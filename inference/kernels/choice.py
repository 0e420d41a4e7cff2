"""`dtype: auto` on a CPU: the precision whose measured kernels make speculative decoding fastest here.

The candidates are every precision of `linear.PRECISIONS` whose kernels run on this CPU: `float32`,
`bfloat16` and `bf16-weights` (fp32 compute on bf16-valued weights, the `bf16w` kernel where it builds).
For each, the target's forward over k tokens is estimated from the kernel table as the sum of its
linears' chosen kernels at k rows (the lm_head at one row for k = 1: a decode step reads only the last
logits); the rest of a forward (attention, norms) is nearly the same in every precision and is left out.
A precision scores the best rate over verify widths k of a chain whose drafts are each accepted with the
nominal probability `NOMINAL_ACCEPTANCE`: (1 + a + ... + a^(k-1)) / cost(k); k = 1 is plain decoding.
The highest score wins; ties keep the earlier candidate (fp32 first: it rounds least).

Why not the rule "bf16 where the CPU has bf16 instructions": on the AVX2 EPYC without them, bf16
weights halve what a memory-bound decode step reads, and its best plain decoding is bf16, while a bf16
verify there is 20x its step; `bf16-weights` keeps both. On AMX, oneDNN's bf16 was measured nearly flat
to 16 rows (before this choice existed). Both outcomes come from the table, not from the flags.
Non-CPU devices keep bf16; a target whose forward's linears are not known from its config (one the lean
engine cannot run) keeps the rule of `resolve_dtype`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from inference.kernels.linear import PRECISIONS, available_kernels
from inference.kernels.table import KernelTable
from inference.precision import AUTO, dtype_name, resolve_dtype

Linears = list[tuple[tuple[int, int], bool, int]]  # (shape (out, in), bias, count) per forward, lm_head last

NOMINAL_ACCEPTANCE = 0.7  # per draft token: a typical trained drafter's chain acceptance
WINDOWS = (1, 2, 4, 8, 16)


@dataclass
class PrecisionChoice:
    """The precision a target runs in, how it was chosen and, when measured, each candidate's costs."""

    name: str  # float32, bfloat16 or bf16-weights
    how: str  # explicit, rule or measured
    forward_ms: dict[str, dict[int, float]] = field(default_factory=dict)  # candidate -> k -> linears' ms
    scores: dict[str, float] = field(default_factory=dict)  # candidate -> best tokens per second

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the model's parameters and activations are in."""
        return torch.float32 if self.weights_bf16 else getattr(torch, self.name)

    @property
    def weights_bf16(self) -> bool:
        return self.name == "bf16-weights"

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.name, "chosen_by": self.how, "forward_ms": self.forward_ms, "scores": self.scores}


def forward_seconds(table: KernelTable, precision: str, linears: Linears, k: int) -> float:
    """The chosen kernels' seconds for one forward over k tokens (the lm_head at one row when k = 1)."""
    total = 0.0
    for i, (shape, bias, count) in enumerate(linears):
        rows = 1 if (k == 1 and i == len(linears) - 1) else k
        total += count * table.seconds(precision, shape, bias, rows)
    return total


def chain_rate(cost: dict[int, float], acceptance: float = NOMINAL_ACCEPTANCE) -> float:
    """Tokens per second of the best verify width: expected tokens per round over the round's cost."""
    return max(sum(acceptance**i for i in range(k)) / seconds for k, seconds in cost.items())


def candidate_precisions(device: torch.device | str = "cpu") -> list[str]:
    """Precisions with at least one kernel of their own here (bf16-weights only with its bf16w kernel)."""
    out = []
    for p in PRECISIONS:
        kernels = available_kernels(p, device)
        if p != "bf16-weights" or "bf16w" in kernels:
            out.append(p)
    return out


def choose_precision(
    linears: Linears, table: KernelTable | None = None, candidates: list[str] | None = None
) -> PrecisionChoice:
    """Measure (or read from the table) every candidate's cost of a forward over `linears` and pick the
    fastest precision."""
    table = table if table is not None else KernelTable.load()
    candidates = candidates or candidate_precisions()
    forward_ms, scores = {}, {}
    for precision in candidates:
        if table.measure(precision, [(s, b) for s, b, _ in linears]):
            table.save()
        cost = {k: forward_seconds(table, precision, linears, k) for k in WINDOWS}
        forward_ms[precision] = {k: round(s * 1e3, 3) for k, s in cost.items()}
        scores[precision] = round(chain_rate(cost), 3)
    best = max(candidates, key=lambda p: (scores[p], -candidates.index(p)))
    return PrecisionChoice(best, "measured", forward_ms, scores)


def resolve_precision(
    dtype: PrecisionChoice | torch.dtype | str | None, device: torch.device | str, linears: Linears | None = None
) -> PrecisionChoice:
    """A target's precision: an explicit one as given (a `PrecisionChoice` made earlier, too); `auto`
    measured on a CPU when the target's forward `linears` are known (the lean engine's,
    `inference.targets.lean_forward.forward_linears`), bf16 on an accelerator, else `resolve_dtype`'s rule."""
    if isinstance(dtype, PrecisionChoice):
        return dtype
    if isinstance(dtype, str) and dtype == "bf16-weights":
        return PrecisionChoice("bf16-weights", "explicit")
    if dtype is not None and dtype != AUTO:
        return PrecisionChoice(dtype_name(resolve_dtype(dtype, device)), "explicit")
    if torch.device(device).type == "cpu" and linears:
        return choose_precision(linears)
    return PrecisionChoice(dtype_name(resolve_dtype(AUTO, device)), "rule")
