"""The training objective: random anchor blocks, decayed per-position weights, and the metrics that
predict serving speed (per-position accuracy, simulated acceptance length).

For each sequence, up to `num_anchors` anchors a are drawn (without replacement, fresh every step) among
the positions where tokens a and a + 1 are both loss-masked (assistant) tokens. Draft token j of the
block anchored at a predicts token a + j (or, distilling, the target's own choice there: `block_targets`)
with weight `loss_mask[a + j] * exp(-(j - 1) / gamma)`. With a draft vocabulary, labels outside it weigh 0
(`restrict_to_draft_vocab`). What each position is scored with, and how base and final logits mix under
the curriculum weight `lambda_at`, is `losses.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inference.drafter.draft_vocab import DraftVocab


def sample_anchors(loss_mask: torch.Tensor, num_anchors: int, generator: torch.Generator) -> torch.Tensor:
    """Anchors [b, A] (A <= num_anchors, -1 = padding) where loss_mask[a] and loss_mask[a + 1] are 1."""
    eligible = (loss_mask[:, :-1] > 0) & (loss_mask[:, 1:] > 0)
    scores = torch.rand(eligible.shape, generator=generator, device="cpu").to(loss_mask.device)
    scores = scores.masked_fill(~eligible, -1.0)
    n = eligible.shape[1]
    top, idx = scores.topk(min(num_anchors, n), dim=1)
    idx = idx.masked_fill(top < 0, n).sort(dim=1).values  # ineligible draws sort last, then become -1
    anchors = idx.masked_fill(idx == n, -1)
    used = int((anchors >= 0).sum(1).max()) if anchors.numel() else 0
    return anchors[:, : max(used, 1)]


@dataclass
class BlockTargets:
    labels: torch.Tensor  # [b, A, D] label ids in the drafter's logit space (0 where invalid)
    weights: torch.Tensor  # [b, A, D] loss weights (0 where invalid or outside the draft vocabulary)
    valid: torch.Tensor  # [b, A, D] bool: the label exists and is an assistant token
    causal_tokens: torch.Tensor  # [b, A, D] target ids the GRU consumes (root, drafts 1..D-1)
    in_vocab: torch.Tensor | None = None  # [b, A, D] bool: the label is inside the draft vocabulary


def block_targets(
    input_ids: torch.Tensor,
    loss_mask: torch.Tensor,
    anchors: torch.Tensor,
    num_draft: int,
    gamma: float,
    next_ids: torch.Tensor | None = None,
) -> BlockTargets:
    """Labels, weights and teacher-forcing inputs of every anchor block.

    Without `next_ids` the labels are the text itself: draft token j of anchor a predicts token a + j.
    With `next_ids` [b, T] (the target's greedy next token at every position: distillation on text the
    target did not write) draft token j is labelled `next_ids[a + j - 1]`, which is what serving would
    verify; it is known only while the text after the anchor agrees with the target's own choices
    (tokens a+1..a+j-1 equal next_ids[a..a+j-2]), and has weight 0 past the first disagreement. On text
    the target wrote greedily both rules give the same labels.
    """
    b, t = input_ids.shape
    offsets = torch.arange(num_draft + 1, device=input_ids.device)
    pos = anchors.clamp(min=0).unsqueeze(-1) + offsets  # [b, A, D + 1]: a, a+1, ..., a+D
    inside = (pos < t) & (anchors >= 0).unsqueeze(-1)
    pos_c = pos.clamp(max=t - 1)
    tokens = torch.gather(input_ids.unsqueeze(1).expand(-1, anchors.shape[1], -1), 2, pos_c)
    mask = torch.gather(loss_mask.unsqueeze(1).expand(-1, anchors.shape[1], -1), 2, pos_c) > 0
    valid = (inside & mask)[..., 1:]
    labels = tokens[..., 1:]
    if next_ids is not None:
        predicted = torch.gather(next_ids.long().unsqueeze(1).expand(-1, anchors.shape[1], -1), 2, pos_c)
        labels = predicted[..., :-1]  # label j = the target's choice after a + j - 1
        agree = (tokens[..., 1:] == labels).long()  # the text's token a + j is the target's choice
        known = torch.cat([torch.ones_like(agree[..., :1]), agree[..., :-1].cumprod(-1)], dim=-1) > 0
        valid = valid & known
    decay = torch.exp(-torch.arange(num_draft, device=input_ids.device, dtype=torch.float32) / gamma)
    return BlockTargets(
        labels=torch.where(valid, labels, 0),
        weights=valid.float() * decay,
        valid=valid,
        causal_tokens=tokens[..., :-1],
    )


def restrict_to_draft_vocab(targets: BlockTargets, vocab: DraftVocab) -> BlockTargets:
    """Labels in draft-vocabulary ids; labels outside the subset keep counting as misses but weigh 0."""
    ids, inside = vocab.to_draft_ids(targets.labels)
    inside = inside & targets.valid
    return BlockTargets(
        labels=torch.where(inside, ids, 0),
        weights=targets.weights * inside,
        valid=targets.valid,
        causal_tokens=targets.causal_tokens,
        in_vocab=inside,
    )


def _correct(greedy: torch.Tensor, targets: BlockTargets) -> torch.Tensor:
    """[b, A, D] bool: the greedy draft equals its valid label (one inside the draft vocabulary)."""
    correct = (greedy == targets.labels) & targets.valid
    if targets.in_vocab is not None:  # a label outside the draft vocabulary can never be drafted
        correct &= targets.in_vocab
    return correct


@torch.no_grad()
def accepted_runs(greedy: torch.Tensor, targets: BlockTargets) -> tuple[torch.Tensor, torch.Tensor]:
    """Each block's run of leading right drafts [b, A] (what a greedy chain would accept), and which blocks
    count [b, A] (those whose first label is valid). `greedy` [b, A, D]: the argmax of the draft logits
    (`losses.PositionLoss.greedy`)."""
    return _correct(greedy, targets).long().cumprod(-1).sum(-1), targets.valid[..., 0]


@torch.no_grad()
def acceptance_stats(greedy: torch.Tensor, targets: BlockTargets) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position greedy accuracy [D] and the simulated chain acceptance length tau (a scalar) of the
    greedy drafts [b, A, D].

    tau = 1 + the number of leading draft tokens equal to the ground truth (bonus included, the SGLang
    convention), averaged over blocks whose first label is valid; a block's run stops at its first
    invalid label.
    """
    correct = _correct(greedy, targets)
    valid_count = targets.valid.flatten(0, -2).sum(0).clamp(min=1)
    per_position = correct.flatten(0, -2).sum(0) / valid_count
    run, blocks = accepted_runs(greedy, targets)
    tau = 1 + run[blocks].float().mean() if blocks.any() else torch.tensor(1.0)
    return per_position, tau


def lambda_at(step: int, total_steps: int, lambda_start: float, decay_ratio: float, curriculum: str) -> float:
    """Weight of the base loss: linear from `lambda_start` to 0 over `decay_ratio * total_steps`.

    `curriculum="none"` keeps `lambda_start` fixed. Derived from the optimizer step alone, so resuming
    from a checkpoint continues the schedule exactly.
    """
    if curriculum == "none":
        return lambda_start
    if curriculum != "linear":
        raise ValueError(f"unknown curriculum {curriculum!r}; choose 'linear' or 'none'")
    horizon = max(decay_ratio * total_steps, 1e-9)
    return lambda_start * max(0.0, 1.0 - step / horizon)


def warmup_cosine(step: int, total_steps: int, warmup_ratio: float, min_lr_ratio: float = 0.0) -> float:
    """LR multiplier: linear warm-up over `warmup_ratio` of the steps, then cosine down to `min_lr_ratio`."""
    warmup = max(int(warmup_ratio * total_steps), 1)
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(total_steps - warmup, 1))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
