"""Validation tau per source of the rows: how acceptance differs between kinds of text.

A drafter trained mostly on chat can accept well on chat and poorly on code; one validation average hides
that. The data modules tag each validation row with its source (`Rows.sources`: the part of the row's id
before its first "/", the source's name in `domino-data`), and this accumulator sums each source's blocks
over the validation epoch: block-weighted tau of the base and the final logits' greedy drafts, reduced over all ranks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from domino_train.method.objectives import BlockTargets, accepted_runs


class SourceTau:
    """Sums of (1 + accepted run) of the base and final logits, and the block count, per source."""

    def __init__(self, sources: list[str], device: torch.device | str = "cpu") -> None:
        self.sources = sources
        self.sums = torch.zeros(len(sources), 3, dtype=torch.float64, device=device)

    @torch.no_grad()
    def add(self, source: torch.Tensor, base: torch.Tensor, final: torch.Tensor, targets: BlockTargets) -> None:
        """The batch's blocks, each counted for its row's source ([b] indices into `sources`); `base`,
        `final`: the greedy drafts [b, A, D] of the base and the final logits."""
        run_base, blocks = accepted_runs(base, targets)
        run_final, _ = accepted_runs(final, targets)
        of_block = source.to(blocks.device).unsqueeze(-1).expand_as(blocks)[blocks]
        counted = torch.stack([1 + run_base[blocks], 1 + run_final[blocks], torch.ones_like(run_base[blocks])], -1)
        self.sums.index_add_(0, of_block.to(self.sums.device), counted.to(torch.float64))

    def results(self, reduce: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> dict[str, float]:
        """`{"tau_base/<source>": ..., "tau_final/<source>": ...}` for every source with a block, after
        `reduce` (the sum over ranks); {} with fewer than two sources (the overall tau says it all)."""
        if len(self.sources) < 2:
            return {}
        out = {}
        for name, (tau_base, tau_final, blocks) in zip(self.sources, reduce(self.sums).tolist(), strict=True):
            if blocks:
                out[f"tau_base/{name or 'unnamed'}"] = tau_base / blocks
                out[f"tau_final/{name or 'unnamed'}"] = tau_final / blocks
        return out
