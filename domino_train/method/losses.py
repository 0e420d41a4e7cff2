"""What a draft position is trained to match: the label (cross-entropy) and, where the target's
distribution is at hand, that distribution (KL, total variation), mixed by weights (`train/loss=`).

Greedy acceptance only asks the drafter's argmax to be the target's, but cross-entropy on one label per
position throws away how sure the target was and what else it would say; matching the target's
distribution (DSpark trains with 0.1 CE + 0.9 TV) teaches the drafter where it may be wrong. The target's
distribution arrives as its top-k tokens and their log-probabilities (from the feature cache, or from the
online forward), so the distances are computed between both distributions coarsened to the k tokens
(those inside the draft vocabulary, with one) and one "everything else" outcome: exact for the k tokens,
and a lower bound on the full distance for the rest.

Draft position j of the block anchored at a is scored against the target's distribution after a + j - 1:
what serving verifies once the drafts before j are accepted. Each term is averaged like the CE,
`sum(w * term) / sum(w)` with the blocks' weights (`objectives.block_targets`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from domino_train.method.log_probs import log_probs_at
from domino_train.method.objectives import BlockTargets
from inference.drafter.draft_vocab import DraftVocab

TERMS = ("ce", "kl", "tv")


@dataclass
class TargetDistribution:
    """The target's top-k distribution at each draft position of each block."""

    ids: torch.Tensor  # [b, A, D, k] ids in the drafter's logit space (0 where outside its vocabulary)
    logprobs: torch.Tensor  # [b, A, D, k] the target's log-probabilities; -inf outside the draft vocabulary


def top_distribution(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's k most likely next tokens at every position: (ids [..., k] int32, log-probs [..., k] fp32)."""
    logits = logits.float()
    values, ids = logits.topk(k, dim=-1)
    return ids.to(torch.int32), values - logits.logsumexp(-1, keepdim=True)


def block_distribution(
    ids: torch.Tensor, logprobs: torch.Tensor, anchors: torch.Tensor, num_draft: int, vocab: DraftVocab | None = None
) -> TargetDistribution:
    """Gather the top-k ([b, T, k] each) at positions a .. a + D - 1 of every anchor [b, A]; with a draft
    vocabulary, ids go to its space and tokens outside it drop into the "everything else" outcome."""
    b, t, k = ids.shape
    positions = (anchors.clamp(min=0).unsqueeze(-1) + torch.arange(num_draft, device=ids.device)).clamp(max=t - 1)
    flat = positions.flatten(1).unsqueeze(-1).expand(-1, -1, k)
    picked_ids = torch.gather(ids.long(), 1, flat).view(b, *positions.shape[1:], k)
    picked = torch.gather(logprobs.float(), 1, flat).view(b, *positions.shape[1:], k)
    if vocab is not None and vocab.is_subset:
        picked_ids, inside = vocab.to_draft_ids(picked_ids)
        picked = picked.masked_fill(~inside, float("-inf"))
    return TargetDistribution(picked_ids, picked)


def weighted_mean(per_position: torch.Tensor, targets: BlockTargets) -> torch.Tensor:
    """sum(w * x) / sum(w) over all draft positions of all blocks."""
    w = targets.weights
    return (per_position * w).sum() / w.sum().clamp(min=1e-8)


class BlockLoss:
    """`ce * CE(label) + kl * KL(target || drafter) + tv * TV(target, drafter)` per draft position.

    `topk`: how many of the target's tokens the distribution keeps when it is computed online (a feature
    cache brings its own k). CE-only (the default) needs no distribution."""

    def __init__(self, ce: float = 1.0, kl: float = 0.0, tv: float = 0.0, topk: int = 32) -> None:
        weights = {"ce": ce, "kl": kl, "tv": tv}
        if any(w < 0 for w in weights.values()) or not any(weights.values()):
            raise ValueError(f"train.loss weights must be >= 0 and not all 0, got {weights}")
        if topk < 1:
            raise ValueError(f"train.loss.topk must be >= 1, got {topk}")
        self.weights, self.topk = weights, topk

    @property
    def needs_distribution(self) -> bool:
        return bool(self.weights["kl"] or self.weights["tv"])

    def __repr__(self) -> str:
        return " + ".join(f"{w:g} {name}" for name, w in self.weights.items() if w)

    def __call__(
        self, logits: torch.Tensor, targets: BlockTargets, dist: TargetDistribution | None = None
    ) -> PositionLoss:
        """The loss over `logits` [..., D, V], with the CE alone and the greedy drafts for the metrics."""
        ids = targets.labels.unsqueeze(-1)
        if self.needs_distribution:
            if dist is None:
                raise ValueError(f"train.loss ({self}) needs the target's distribution; none was given")
            ids = torch.cat([ids, dist.ids.to(ids.dtype)], dim=-1)
        logq, greedy = log_probs_at(logits, ids)
        ce = -logq[..., 0]
        per_position = self.weights["ce"] * ce
        if self.needs_distribution:
            per_position = per_position + self._distances(logq[..., 1:], dist)
        return PositionLoss(weighted_mean(per_position, targets), weighted_mean(ce.detach(), targets), greedy)

    def _distances(self, logq_k: torch.Tensor, dist: TargetDistribution) -> torch.Tensor:
        """KL and TV between the coarsened distributions, from the drafter's log-probs at the target's top-k."""
        inside = torch.isfinite(dist.logprobs)
        p = dist.logprobs.exp()  # 0 outside the draft vocabulary
        logq_k = logq_k.masked_fill(~inside, 0.0)
        q = logq_k.exp() * inside
        p_rest, q_rest = (1 - p.sum(-1)).clamp(min=0), (1 - q.sum(-1)).clamp(min=0)
        out = torch.zeros_like(p_rest)
        if self.weights["tv"]:
            out = out + self.weights["tv"] * 0.5 * ((p - q).abs().sum(-1) + (p_rest - q_rest).abs())
        if self.weights["kl"]:
            kl = (torch.xlogy(p, p) - p * logq_k).sum(-1)
            kl = kl + torch.xlogy(p_rest, p_rest) - p_rest * q_rest.clamp(min=1e-12).log()
            out = out + self.weights["kl"] * kl
        return out


@dataclass
class PositionLoss:
    """One set of logits scored: the loss, its CE alone (reported whatever the mix), the greedy drafts."""

    loss: torch.Tensor
    ce: torch.Tensor
    greedy: torch.Tensor  # [..., D] argmax ids in the drafter's logit space (for the metrics)


@dataclass
class DominoLoss:
    """`loss = lam * L(base) + (1 - lam) * L(final)`, the two CEs and both logits' greedy drafts."""

    loss: torch.Tensor
    ce_base: torch.Tensor
    ce_final: torch.Tensor
    greedy_base: torch.Tensor
    greedy_final: torch.Tensor


def domino_loss(
    base: torch.Tensor,
    final: torch.Tensor | None,
    targets: BlockTargets,
    lam: float,
    loss: BlockLoss | None = None,
    dist: TargetDistribution | None = None,
) -> DominoLoss:
    """`lam * L(base) + (1 - lam) * L(final)`, L the `BlockLoss` (CE alone by default).

    `final=None` is a drafter without head (DFlash): it trains on L(base) alone, whatever `lam` is.
    """
    loss = loss or BlockLoss()
    b = loss(base, targets, dist)
    if final is None:
        return DominoLoss(b.loss, b.ce, b.ce, b.greedy, b.greedy)
    f = loss(final, targets, dist)
    return DominoLoss(lam * b.loss + (1 - lam) * f.loss, b.ce, f.ce, b.greedy, f.greedy)
