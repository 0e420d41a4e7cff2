"""The Domino head's block rollout, written once: draft tokens one after another, each corrected from the GRU
state after the tokens before it.

Draft position j (0-based) past the pure-draft prefix gets `base_j + correction(H_j, S)`, where S is the GRU
state after the root, the prefix and the drafts before j; `choose` turns those logits into the next draft
token (argmax, a sample, a recording), which the GRU then consumes. Training-time testing
(`DominoDrafter.rollout_logits`), the chain decoder (`draft_chain`) and its static rollout on CUDA graphs
(`GreedyChainRollout`) all run `roll_out`; they differ in `choose` and in the GRU steps passed in:
`TrainingSteps` go through the `nn.GRU` module (DeepSpeed ZeRO-3's hooks), `DecodingSteps` through the cell
written out. Shapes are fixed by the block, so a rollout can be captured as a CUDA graph.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Protocol

import torch

from inference.drafter.head import DominoHead


class GruSteps(Protocol):
    head: DominoHead

    def start(self, token_embeds: torch.Tensor) -> torch.Tensor:
        """The state [..., G] after consuming `token_embeds` [..., n, H] (n >= 1) from the zero state."""

    def advance(self, token_embeds: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The state [..., G] after also consuming `token_embeds` [..., H]."""


class TrainingSteps:
    """The head's training steps (`DominoHead.training_step`), one token at a time from `init_state`."""

    def __init__(self, head: DominoHead) -> None:
        self.head = head

    def start(self, token_embeds: torch.Tensor) -> torch.Tensor:
        lead = token_embeds.shape[:-2]
        state = self.head.init_state(prod(lead), token_embeds.device, token_embeds.dtype).view(*lead, -1)
        for i in range(token_embeds.shape[-2]):
            state = self.head.training_step(token_embeds[..., i, :], state)
        return state

    def advance(self, token_embeds: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.head.training_step(token_embeds, state)


class DecodingSteps:
    """The head's decoding steps: the start's gates in one product, the first step without W_hh . 0."""

    def __init__(self, head: DominoHead) -> None:
        self.head = head

    def start(self, token_embeds: torch.Tensor) -> torch.Tensor:
        gates = self.head.decoding_gates(token_embeds.flatten(0, -2)).view(*token_embeds.shape[:-1], -1)
        first, *rest = gates.unbind(-2)
        state = self.head.decoding_first_step(first)
        for gi in rest:
            state = self.head.decoding_step(gi, state)
        return state

    def advance(self, token_embeds: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.head.decoding_step(self.head.decoding_gates(token_embeds), state)


def roll_out(
    steps: GruSteps,
    embed: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    base: torch.Tensor,
    start_tokens: torch.Tensor,
    choose: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    """Roll the head out over the draft positions after the prefix.

    hidden [..., D, H] and base logits [..., D, V] of the D draft positions; `start_tokens` [..., 1 + p]:
    the root and the p prefix drafts (target ids) the GRU consumes first; `embed`: target ids -> embeddings.
    `choose(logits [..., V])` is called for positions p..D-1 in order and returns the drafted target ids
    [...], consumed by the GRU before the next position.
    """
    d = hidden.shape[-2]
    state = steps.start(embed(start_tokens).to(hidden.dtype))
    for j in range(start_tokens.shape[-1] - 1, d):
        token = choose(base[..., j, :] + steps.head.correction(hidden[..., j, :], state))
        if j + 1 < d:
            state = steps.advance(embed(token).to(hidden.dtype), state)
