"""Chain verification rules: which draft tokens the target keeps, and the bonus token it adds.

A rule sees the target's logits at the D + 1 verified positions `[root, d_1 .. d_D]` (row i is the
target's next-token distribution after position i, so row i - 1 judges draft token d_i and row D gives
the bonus when every draft is kept) and returns the committed tokens: the accepted drafts d_1..d_a
followed by one token of the target's. Every distribution comes from `inference.decoding.sampling`, the same
transform plain sampling applies, and a round costs one host read.

- `match` (any temperature): draw y_i from the target at every position (argmax at T = 0), keep d_i
  while d_i == y_{i-1}, commit y_a as the bonus. Lossless for any drafts: each committed token is a
  fresh draw from the target given the committed prefix. The drafts are the drafter's argmax.
- `rejection` (exact speculative sampling, Leviathan et al. / Chen et al.): drafts are drawn from the
  drafter's own distribution q; d_i is kept with probability min(1, p(d_i) / q(d_i)); at the first
  rejection the bonus is drawn from norm(max(0, p - q)), and from p after a fully accepted block.
  Accepts sum(min(p, q)) per position instead of p(argmax q), which is more when q resembles p.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from inference.decoding.sampling import SamplingParams, bernoulli, probabilities, sample, sample_from

VERIFY_RULES = ("match", "rejection")


@dataclass
class ChainDraft:
    """The D draft tokens of one round (device tensor) and, for rejection sampling, their q rows."""

    tokens: torch.Tensor  # [D] long
    probs: torch.Tensor | None = None  # [D, V]: the distribution each token was drawn from
    scores: list[float] | None = None  # the drafter's log-probability of the draft up to each token (windows)

    def prefix(self, n: int) -> ChainDraft:
        """The first n draft tokens (a shorter verify window)."""
        cut = lambda x: None if x is None else x[:n]  # noqa: E731
        return ChainDraft(self.tokens[:n], cut(self.probs), cut(self.scores))


def accepted_prefix(draft: list[int], choice: list[int]) -> int:
    """How many leading draft tokens equal the target's choices."""
    a = 0
    while a < len(draft) and draft[a] == choice[a]:
        a += 1
    return a


class ChainVerifier(ABC):
    """One acceptance rule; `sampled_drafts` says whether drafts must be drawn from q (with q kept)."""

    sampled_drafts = False

    def __init__(self, params: SamplingParams) -> None:
        self.params = params

    @abstractmethod
    def __call__(
        self, draft: ChainDraft, target_logits: torch.Tensor, generator: torch.Generator | None = None
    ) -> list[int]:
        """Committed tokens (accepted drafts, then the bonus) from the target's logits [D + 1, V]."""


class MatchVerifier(ChainVerifier):
    def __call__(
        self, draft: ChainDraft, target_logits: torch.Tensor, generator: torch.Generator | None = None
    ) -> list[int]:
        n = draft.tokens.numel()
        choice = sample(target_logits, self.params, generator)
        values = torch.cat([draft.tokens, choice]).tolist()
        a = accepted_prefix(values[:n], values[n:])
        return values[n : n + a + 1]  # accepted drafts equal the target's draws, then the bonus


class RejectionVerifier(ChainVerifier):
    sampled_drafts = True

    def __call__(
        self, draft: ChainDraft, target_logits: torch.Tensor, generator: torch.Generator | None = None
    ) -> list[int]:
        n = draft.tokens.numel()
        p = probabilities(target_logits, self.params)  # [n + 1, V]
        if n == 0:
            return sample_from(p, generator).tolist()
        if draft.probs is None:
            raise ValueError("rejection sampling needs the draft distributions (ChainDraft.probs)")
        q = draft.probs.to(p.dtype)
        idx = draft.tokens.unsqueeze(-1)
        p_tok, q_tok = p[:n].gather(-1, idx).squeeze(-1), q.gather(-1, idx).squeeze(-1)
        accept = bernoulli((p_tok / q_tok.clamp_min(torch.finfo(p.dtype).tiny)).clamp(max=1.0), generator)
        residual = (p[:n] - q).clamp_min(0)
        total = residual.sum(-1, keepdim=True)
        # p == q leaves no residual, but then rejection has probability 0: any valid row will do.
        residual = torch.where(total > 0, residual / total.clamp_min(torch.finfo(p.dtype).tiny), p[:n])
        # One candidate per possible stop: the residual at each position, p after the last. Only the
        # candidate at the first rejection is used; drawing them all keeps the round at one host read.
        candidates = sample_from(torch.cat([residual, p[n:]]), generator)
        values = torch.cat([draft.tokens, accept.long(), candidates]).tolist()
        drafts, accepted, bonus = values[:n], values[n : 2 * n], values[2 * n :]
        a = accepted.index(0) if 0 in accepted else n
        return drafts[:a] + [bonus[a]]


def make_verifier(rule: str, params: SamplingParams) -> ChainVerifier:
    """`match` or `rejection`; at T = 0 both are the greedy match (rejection with one-hot p and q)."""
    if rule not in VERIFY_RULES:
        raise ValueError(f"unknown verify rule {rule!r}; choose one of {', '.join(VERIFY_RULES)}")
    if rule == "rejection" and not params.greedy:
        return RejectionVerifier(params)
    return MatchVerifier(params)
