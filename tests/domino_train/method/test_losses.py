import pytest
import torch
import torch.nn.functional as F

from domino_train.method.losses import BlockLoss, block_distribution, domino_loss, top_distribution
from domino_train.method.objectives import BlockTargets, block_targets, restrict_to_draft_vocab
from inference.drafter.draft_vocab import DraftVocab

V = 50
ANCHORS = torch.tensor([[1, 5]])


def _blocks(seed=0, anchors=((1, 5),)):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (1, 12), generator=g)
    t = block_targets(ids, torch.ones(1, 12, dtype=torch.long), torch.tensor(anchors), 3, 7.0)
    return ids, t, torch.randn(1, len(anchors[0]), 3, V, generator=g)


def weighted_ce(logits: torch.Tensor, t: BlockTargets) -> torch.Tensor:
    """The reference: sum(w * CE) / sum(w) over every draft position, by `F.cross_entropy`."""
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), t.labels.view(-1), reduction="none")
    return (ce * t.weights.view(-1)).sum() / t.weights.sum()


def test_the_ce_is_sum_w_ce_over_sum_w_and_the_greedy_drafts_are_the_argmax():
    _, t, logits = _blocks()
    scored = BlockLoss()(logits, t)
    torch.testing.assert_close(scored.loss, weighted_ce(logits, t))
    torch.testing.assert_close(scored.ce, weighted_ce(logits, t))
    assert torch.equal(scored.greedy, logits.argmax(-1))


def test_domino_loss_mixes_base_and_final_by_lambda():
    _, t, base = _blocks()
    final = base + torch.randn(base.shape, generator=torch.Generator().manual_seed(1))
    scored = domino_loss(base, final, t, 0.25)
    torch.testing.assert_close(scored.ce_base, weighted_ce(base, t))
    torch.testing.assert_close(scored.ce_final, weighted_ce(final, t))
    torch.testing.assert_close(scored.loss, 0.25 * scored.ce_base + 0.75 * scored.ce_final)
    assert torch.equal(scored.greedy_base, base.argmax(-1)) and torch.equal(scored.greedy_final, final.argmax(-1))
    no_head = domino_loss(base, None, t, 0.25)  # a DFlash drafter trains on L(base) alone
    assert all(torch.equal(x, scored.ce_base) for x in (no_head.loss, no_head.ce_base, no_head.ce_final))


def _target_logits(seed=2):
    return torch.randn(1, 12, V, generator=torch.Generator().manual_seed(seed)) * 2


def test_with_the_whole_vocabulary_the_distances_are_exact():
    _, t, logits = _blocks()
    target = _target_logits()
    dist = block_distribution(*top_distribution(target, V), ANCHORS, 3)
    p = torch.stack([target[0, a : a + 3].softmax(-1) for a in (1, 5)]).unsqueeze(0)  # positions a .. a + 2
    q = logits.softmax(-1)
    w = t.weights
    tv = 0.5 * (p - q).abs().sum(-1)
    kl = (p * (p.log() - q.log())).sum(-1)
    scored = BlockLoss(ce=0.0, tv=1.0)(logits, t, dist)
    tv_loss, ce = scored.loss, scored.ce
    kl_loss = BlockLoss(ce=0.0, kl=1.0)(logits, t, dist).loss
    torch.testing.assert_close(tv_loss, (tv * w).sum() / w.sum())
    torch.testing.assert_close(kl_loss, (kl * w).sum() / w.sum(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ce, weighted_ce(logits, t))
    mixed = BlockLoss(ce=0.1, tv=0.9)(logits, t, dist).loss
    torch.testing.assert_close(mixed, 0.1 * weighted_ce(logits, t) + 0.9 * tv_loss)


def test_top_k_coarsens_the_rest_into_one_outcome():
    _, t, logits = _blocks()
    target = _target_logits()
    full = BlockLoss(ce=0.0, tv=1.0)(logits, t, block_distribution(*top_distribution(target, V), ANCHORS, 3)).loss
    ids, logprobs = top_distribution(target, 4)
    assert torch.equal(ids[..., 0].long(), target.argmax(-1))
    dist = block_distribution(ids, logprobs, ANCHORS, 3)
    tv_k = BlockLoss(ce=0.0, tv=1.0)(logits, t, dist).loss
    assert 0 < tv_k <= full + 1e-6  # a coarsening never adds distance
    q = logits.softmax(-1).gather(-1, dist.ids)
    p = dist.logprobs.exp()
    by_hand = 0.5 * ((p - q).abs().sum(-1) + ((1 - p.sum(-1)) - (1 - q.sum(-1))).abs())
    torch.testing.assert_close(tv_k, (by_hand * t.weights).sum() / t.weights.sum())


def test_tokens_outside_the_draft_vocabulary_join_the_rest_and_padding_is_harmless():
    vocab = DraftVocab(torch.nn.Module(), 10, V)
    vocab.set_ids(torch.arange(0, 20, 2))  # even ids 0..18
    ids, t, _ = _blocks()
    t = restrict_to_draft_vocab(t, vocab)
    target = _target_logits()
    top_ids, top_lp = top_distribution(target, 6)
    top_lp[0, 11] = float("-inf")  # a padded position
    dist = block_distribution(top_ids, top_lp, ANCHORS, 3, vocab)
    outside = (top_ids[0, torch.tensor([1, 2, 3, 5, 6, 7])] % 2 == 1) | (top_ids[0, [1, 2, 3, 5, 6, 7]] >= 20)
    assert torch.equal(torch.isinf(dist.logprobs[0].flatten(0, 1)), outside)
    logits = torch.randn(1, 2, 3, 10, requires_grad=True)
    loss = BlockLoss(ce=0.1, kl=0.5, tv=0.9)(logits, t, dist).loss
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


def test_minimising_the_distance_matches_the_target():
    _, t, _ = _blocks()
    dist = block_distribution(*top_distribution(_target_logits(), 8), ANCHORS, 3)
    logits = torch.zeros(1, 2, 3, V, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.1)
    for term in ("tv", "kl"):
        loss = BlockLoss(ce=0.0, **{term: 1.0})
        start = float(loss(logits, t, dist).loss.detach())
        for _ in range(300):
            opt.zero_grad()
            loss(logits, t, dist).loss.backward()
            opt.step()
        assert float(loss(logits, t, dist).loss.detach()) < 0.05 * start, term


def test_bad_weights_are_refused_and_missing_distributions_named():
    with pytest.raises(ValueError, match="not all 0"):
        BlockLoss(ce=0.0)
    with pytest.raises(ValueError, match=">= 0"):
        BlockLoss(tv=-1.0)
    _, t, logits = _blocks()
    with pytest.raises(ValueError, match="needs the target's distribution"):
        BlockLoss(tv=1.0)(logits, t)
