"""`RaggedWindow`: the tokens one ragged batched forward runs, one row per sequence, padded to one width.

Row r holds its sequence's window (a verification's root and draft, or a prompt) left-aligned in W
columns: `ids` (pad columns hold any id), `depths` (position of each token after the row's cached prefix:
position = the row's cache length + depth; a chain's 0..n-1, a tree's node depths), `visible` (token i
attends to token j of the same row's window: causal for chains and prompts, the tree's ancestors for
trees) and `valid` (real tokens vs padding). The forward (`ragged_forward.py`) hides the pad columns from
every real token and shows a pad token only itself, whatever `visible` says about them, so a pad id never
changes a real row's output.

`stack` builds it from per-sequence windows (a decoder's `VerifyWindow`: ids [1, n], depths [n] or None,
visible [n, n] or None; None for a row with nothing to run this round), `prompts` from prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch


class WindowLike(Protocol):
    """What `stack` reads from one sequence's window (`inference.decoding.speculative.VerifyWindow`)."""

    ids: torch.Tensor  # [1, n] or [n] long
    depths: torch.Tensor | None  # [n]; None = 0..n-1
    visible: torch.Tensor | None  # [n, n] bool; None = causal


@dataclass
class _Tokens:
    ids: torch.Tensor
    depths: torch.Tensor | None = None
    visible: torch.Tensor | None = None


@dataclass
class RaggedWindow:
    """A padded batch of windows (see the module doc)."""

    ids: torch.Tensor  # [B, W] long
    depths: torch.Tensor  # [B, W] long
    visible: torch.Tensor  # [B, W, W] bool
    valid: torch.Tensor  # [B, W] bool

    def __post_init__(self) -> None:
        b, w = self.ids.shape
        shapes = {"depths": (b, w), "visible": (b, w, w), "valid": (b, w)}
        for name, shape in shapes.items():
            got = list(getattr(self, name).shape)
            if tuple(got) != shape:
                raise ValueError(f"{name} must be {list(shape)} for ids {[b, w]}, got {got}")

    @property
    def width(self) -> int:
        return self.ids.shape[1]

    def counts(self) -> torch.Tensor:
        """[B] long: each row's number of real tokens."""
        return self.valid.sum(dim=1)

    @classmethod
    def stack(
        cls,
        windows: Sequence[WindowLike | None],
        pad_id: int = 0,
        device: torch.device | str | None = None,
        width: int | None = None,
    ) -> RaggedWindow:
        """One row per window (None: a row with no token this round), padded to the widest (or to `width`,
        when wider: a forward of a given shape)."""
        rows = [None if win is None else (win.ids.reshape(-1), win.depths, win.visible) for win in windows]
        if not rows:
            raise ValueError("a ragged window needs at least one row")
        if device is None:
            device = next((row[0].device for row in rows if row is not None), "cpu")
        width = max([1, width or 1, *(row[0].numel() for row in rows if row is not None)])
        b = len(rows)
        ids = torch.full((b, width), pad_id, dtype=torch.long, device=device)
        depths = torch.arange(width, device=device).repeat(b, 1)
        visible = torch.zeros(b, width, width, dtype=torch.bool, device=device)
        valid = torch.zeros(b, width, dtype=torch.bool, device=device)
        causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
        for r, row in enumerate(rows):
            if row is None:
                continue
            row_ids, row_depths, row_visible = row
            n = row_ids.numel()
            ids[r, :n] = row_ids
            if row_depths is not None:
                depths[r, :n] = row_depths
            visible[r, :n, :n] = causal[:n, :n] if row_visible is None else row_visible
            valid[r, :n] = True
        return cls(ids, depths, visible, valid)

    @classmethod
    def prompts(
        cls,
        prompts: Sequence[torch.Tensor | list[int] | None],
        pad_id: int = 0,
        device: torch.device | str | None = None,
    ) -> RaggedWindow:
        """Causal windows of prompts of different lengths (None: a row that takes no token)."""
        windows = [
            None if p is None else _Tokens(torch.as_tensor(p, dtype=torch.long, device=device).reshape(-1))
            for p in prompts
        ]
        if any(win is not None and win.ids.numel() == 0 for win in windows):
            raise ValueError("an empty prompt (pass None for a row that takes no token)")
        return cls.stack(windows, pad_id, device)
