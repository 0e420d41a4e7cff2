"""`LogitsProbe`: the logits a decoder chose output positions from, captured while it generates.

The lossless check (`inference.eval.divergence`) needs, at the first position where a method's output
parts from `ar`'s, the row of the method's own verify forward that chose the token there, with that
forward's shape (its width, the row's index in it and, in a batch, the batch's rows, padded width, real
(packed) tokens and key span: the attention kernel blocks over the keys, so a longer span rounds otherwise),
and `ar`'s one-token logits at that position and the few after it. A batch-1 generation is replayed with
a probe (decoding is deterministic within a process, so the replay commits the same tokens); a batched
run (`BatchedDecoder`) is not replayed: it compares each row with its reference as it commits and
captures the row there. A decoder reports every committed token's row (`observe`); the probe keeps the
one at `position` and those at the output indices in `around`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LogitsProbe:
    position: int  # the output index to capture
    around: range | None = None  # more output indices whose rows to keep in `rows` (None: none)
    logits: torch.Tensor | None = None  # [V] float32 on the CPU: the row that chose output `position`
    width: int | None = None  # tokens in the forward that produced it (a batch: this row's real tokens)
    row: int | None = None  # its row in that forward
    batch_rows: int = 1  # rows of that forward (a batched run's ragged cache)
    batch_width: int | None = None  # columns of that forward, padding included (None: `width`)
    batch_span: int | None = None  # cache slots its queries attended over (a batch: the longest row + columns)
    batch_tokens: int | None = None  # real tokens of that forward, run packed (None: rows x columns)
    rows: dict[int, torch.Tensor] = field(default_factory=dict)  # output index -> [V] float32, every captured

    def observe(self, first: int, rows: torch.Tensor, width: int, window_rows: list[int]) -> None:
        """`rows[k]` [n, V] chose output token `first + k`; it is row `window_rows[k]` of a `width`-token forward."""
        for k in range(rows.shape[0]):
            if first + k == self.position or (self.around is not None and first + k in self.around):
                self.rows.setdefault(first + k, rows[k].float().cpu())
        if self.logits is None and 0 <= self.position - first < rows.shape[0]:
            self.logits = self.rows[self.position]
            self.width, self.row = width, window_rows[self.position - first]
