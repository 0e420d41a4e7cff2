"""The per-row halves of a batched round (`batched.py`): what a row drafts, which window it verifies, how
the returned logits are judged and how the row commits.

A speculative method's rule is its batch-1 decoder itself (`SpeculativeDecoder.draft` / `no_draft` /
`verify_window` / `judge` / `commit`), so a row of a batch behaves exactly as that decoder does alone.
`ARRule` gives the `ar` baseline the same four halves: no draft, a one-token window (the root), the next
token sampled from its logits, the row's cache cropped to the root's position plus one. The batched loop
is then one loop for every method.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from inference.decoding.ar import ARDecoder
from inference.decoding.batch_budget import BatchBudget
from inference.decoding.generation import take_until_stop
from inference.decoding.sampling import sample
from inference.decoding.speculative import DecodeState, SpeculativeDecoder, Verdict, VerifyWindow
from inference.decoding.stats import GenerationStats
from inference.drafter import DominoDrafter


class RowRule(Protocol):
    """The halves of a round a batched loop runs per row (a `SpeculativeDecoder` has them all)."""

    layer_ids: list[int] | None  # target layers whose features the rule needs (None: no features)
    drafter: DominoDrafter | None  # whose per-row draft cache receives the committed positions' features

    def max_window(self) -> int: ...

    def draft_blocks(self, states: list[DecodeState]) -> None: ...

    def draft(self, state: DecodeState) -> Any: ...

    def verify_window(self, state: DecodeState, draft: Any) -> VerifyWindow: ...

    def judge(self, state: DecodeState, draft: Any, logits: torch.Tensor, features: torch.Tensor | None) -> Verdict: ...

    def commit(
        self, state: DecodeState, verdict: Verdict, tokens: list[int], stats: GenerationStats
    ) -> tuple[bool, bool]: ...


class ARRule:
    """`ar` as a batched row rule: every round verifies the root alone and commits the token after it.

    Outputs and `accept_lengths` (all 1) equal `ARDecoder.generate`'s: the same `sample` on the same
    logits row, the same stop / budget rule."""

    layer_ids = None
    drafter = None

    def __init__(self, decoder: ARDecoder) -> None:
        self.decoder = decoder
        self.target = decoder.target

    def max_window(self) -> int:
        return 1

    def draft_blocks(self, states: list[DecodeState]) -> None:
        return None

    def draft(self, state: DecodeState) -> None:
        return None

    def verify_window(self, state: DecodeState, draft: None) -> VerifyWindow:
        return VerifyWindow(state.root.view(1, 1))

    def judge(self, state: DecodeState, draft: None, logits: torch.Tensor, features: torch.Tensor | None) -> Verdict:
        token = sample(logits[:1], self.decoder.sampling, state.generator)
        return Verdict(tokens=token.tolist(), features=features, logits=logits)

    def commit(
        self, state: DecodeState, verdict: Verdict, tokens: list[int], stats: GenerationStats
    ) -> tuple[bool, bool]:
        """Emit the token (a stop token or the budget ends the row) and keep the root's cache entry."""
        emit, stopped = take_until_stop(verdict.tokens, self.decoder.stop_token_ids, state.tokens_left)
        tokens.extend(emit)
        stats.accept_lengths.append(len(emit))
        state.tokens_left -= len(emit)
        if stopped or state.tokens_left == 0:
            return True, stopped
        self.target.crop_cache(state.target_cache, state.length + 1)
        state.length += 1
        state.root = torch.tensor(emit[-1:], dtype=torch.long, device=state.root.device)
        return False, False


def row_rule(
    decoder: ARDecoder | SpeculativeDecoder, concurrency: int = 1, calibrate: bool = True
) -> RowRule | BatchBudget:
    """The row rule of a decoder from `build_decoder` (a cost-aware one: `BatchBudget`, its draft sizes
    chosen across the batch, on a cost curve corrected by the timed rounds unless not `calibrate`);
    refuses what a batch cannot run row by row."""
    if not isinstance(decoder, ARDecoder | SpeculativeDecoder):
        raise ValueError(f"cannot batch a {type(decoder).__name__}: pass a decoder from build_decoder")
    if decoder.probe is not None:
        raise ValueError("batched decoding does not probe logits (the lossless replay): use the batch-1 decoder")
    if isinstance(decoder, ARDecoder):
        return ARRule(decoder)
    if decoder.schedule is not None:
        raise ValueError("batched decoding does not replay schedules (the lossless replay): use the batch-1 decoder")
    return BatchBudget(decoder, concurrency, calibrate) if decoder.cost_aware else decoder
