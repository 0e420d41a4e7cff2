"""What every decoding method shares: the `Generation` result, the `Decoder` interface, the token budget
and the stop rule.

Stop rule (the same for every method, so outputs compare token for token): a generation ends right
after the first stop token, which is included in the output (as `transformers.generate` does), or when
`max_new_tokens` tokens have been emitted, or when the target's context is full. A prompt that leaves
no room for a single new token raises `PromptTooLongError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from inference.decoding.logits_probe import LogitsProbe
from inference.decoding.options import DecodeOptions
from inference.decoding.stats import GenerationStats, StageClock
from inference.targets.adapter import TargetModel


class PromptTooLongError(ValueError):
    """The prompt fills the target's context: nothing can be generated after it."""


@dataclass
class Generation:
    tokens: list[int]  # the new tokens; the stop token that ended the generation is included
    finish_reason: str  # "stop" (a stop token) or "length" (max_new_tokens or the context limit)
    stats: GenerationStats
    text: str | None = None  # filled by `inference.generate` when the target has a tokenizer
    probe: LogitsProbe | None = None  # a batched run given references: the logits where it first parted


def take_until_stop(tokens: list[int], stop_token_ids: frozenset[int], limit: int) -> tuple[list[int], bool]:
    """The part of `tokens` that may be emitted (at most `limit`, up to and including the first stop
    token) and whether a stop token ended it."""
    tokens = tokens[:limit]
    for i, token in enumerate(tokens):
        if token in stop_token_ids:
            return tokens[: i + 1], True
    return tokens, False


def context_length(target: TargetModel) -> int:
    """Positions the target supports (`max_position_embeddings`; unbounded when the config has none)."""
    n = getattr(target.config, "max_position_embeddings", None)
    return int(n) if n else 2**62


class Decoder(ABC):
    """A decoding method: prompt ids in, a `Generation` out. Subclasses: `ARDecoder`, `SpeculativeDecoder`."""

    name: str = "decoder"

    def __init__(self, target: TargetModel, options: DecodeOptions | None = None) -> None:
        self.target = target
        self.options = options = options or DecodeOptions()
        self.sampling = options.sampling
        stop = options.stop_token_ids
        self.stop_token_ids = frozenset(target.stop_token_ids if stop is None else stop)
        self.max_context = options.max_context or context_length(target)
        self.clock = StageClock(target.device, sync=options.sync_stages)
        self.probe: LogitsProbe | None = None  # set by the lossless check's replay (logits_probe.py)

    def forget_rounds(self) -> None:
        """Forget what the rounds so far taught this decoder (a plain decoder learns nothing; cost-aware ones
        override this), so that a warm-up's first-call costs do not steer the rounds that are timed."""
        return None

    def prompt_tensor(self, prompt_ids: list[int] | torch.Tensor) -> torch.Tensor:
        """[1, T] long on the target's device; batch size 1 only (the papers' b = 1 latency setting)."""
        ids = torch.as_tensor(prompt_ids, dtype=torch.long, device=self.target.device)
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.dim() != 1 or ids.numel() == 0:
            raise ValueError(f"expected one non-empty prompt of token ids, got shape {tuple(ids.shape)}")
        return ids.unsqueeze(0)

    def token_budget(self, prompt_len: int, max_new_tokens: int) -> int:
        """How many tokens this prompt may get: `max_new_tokens`, capped by the room left in the context."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        room = self.max_context - prompt_len
        if room < 1:
            raise PromptTooLongError(
                f"prompt of {prompt_len} tokens leaves no room in the target's context of {self.max_context}"
            )
        return min(max_new_tokens, room)

    @abstractmethod
    def generate(
        self, prompt_ids: list[int] | torch.Tensor, max_new_tokens: int, generator: torch.Generator | None = None
    ) -> Generation:
        """Decode after `prompt_ids`; `generator` drives every random draw (None = torch's global RNG)."""
