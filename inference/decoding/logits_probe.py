"""`LogitsProbe`: the logits a decoder chose one output position from, captured while it generates.

The lossless check (`inference.eval.divergence`) replays a generation that parted from `ar`'s with a probe
at the first position where the two differ. Decoding is deterministic within a process, so the replay
commits the same tokens, and the probe keeps the row of the method's own verify forward that chose the
token there, with that forward's width and the row's index in it; on `ar` it keeps the logits of the
one-token step. A decoder reports every committed token's row (`observe`); the probe keeps one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LogitsProbe:
    position: int  # the output index to capture
    logits: torch.Tensor | None = None  # [V] float32 on the CPU, once captured
    width: int | None = None  # tokens in the forward that produced it
    row: int | None = None  # its row in that forward

    def observe(self, first: int, rows: torch.Tensor, width: int, window_rows: list[int]) -> None:
        """`rows[k]` [n, V] chose output token `first + k`; it is row `window_rows[k]` of a `width`-token forward."""
        k = self.position - first
        if self.logits is None and 0 <= k < rows.shape[0]:
            self.logits = rows[k].float().cpu()
            self.width, self.row = width, window_rows[k]
