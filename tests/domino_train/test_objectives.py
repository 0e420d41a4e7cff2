import math

import pytest
import torch
import torch.nn.functional as F

from domino_train.objectives import (
    acceptance_stats,
    block_targets,
    lambda_at,
    sample_anchors,
    warmup_cosine,
    weighted_ce,
)


def test_anchors_only_where_a_and_a_plus_1_are_assistant_tokens():
    mask = torch.tensor([[0, 0, 1, 1, 1, 0, 1, 1, 0, 0], [0, 1, 0, 1, 0, 1, 0, 0, 0, 0]])
    seen = set()
    for seed in range(30):
        anchors = sample_anchors(mask, 3, torch.Generator().manual_seed(seed))
        for a in anchors[0].tolist():
            assert a in (2, 3, 6)
            seen.add(a)
        assert (anchors[1] == -1).all()  # no eligible pair in row 2
        assert anchors.shape[1] <= 3 and (anchors[0][anchors[0] >= 0].diff() > 0).all()
    assert seen == {2, 3, 6}


def test_block_targets_labels_weights_and_teacher_tokens():
    ids = torch.arange(100, 112).unsqueeze(0)  # token at position p is 100 + p
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1]])
    t = block_targets(ids, mask, torch.tensor([[2, 9, -1]]), num_draft=4, gamma=2.0)
    assert t.labels[0, 0].tolist() == [103, 104, 105, 106]  # draft j predicts token a + j
    assert t.causal_tokens[0, 0].tolist() == [102, 103, 104, 105]  # root, then the true drafts
    assert t.valid[0, 1].tolist() == [True, True, False, False]  # runs past the end of the sequence
    assert not t.valid[0, 2].any()
    decay = [math.exp(-k / 2.0) for k in range(4)]
    torch.testing.assert_close(t.weights[0, 0], torch.tensor(decay))
    assert t.weights[0, 1, 2:].sum() == 0


def test_weighted_ce_is_sum_w_ce_over_sum_w():
    ids = torch.randint(0, 50, (1, 12))
    t = block_targets(ids, torch.ones(1, 12, dtype=torch.long), torch.tensor([[1, 5]]), 3, 7.0)
    logits = torch.randn(1, 2, 3, 50)
    ce = F.cross_entropy(logits.view(-1, 50), t.labels.view(-1), reduction="none")
    expected = (ce * t.weights.view(-1)).sum() / t.weights.sum()
    torch.testing.assert_close(weighted_ce(logits, t), expected)


def test_acceptance_stats():
    ids = torch.arange(0, 10).unsqueeze(0)
    t = block_targets(ids, torch.ones(1, 10, dtype=torch.long), torch.tensor([[0, 4]]), 3, 7.0)
    logits = torch.full((1, 2, 3, 10), -9.0)
    # block 0 (labels 1,2,3): right, right, wrong -> tau 3; block 1 (labels 5,6,7): wrong first -> tau 1
    for j, tok in enumerate([1, 2, 0]):
        logits[0, 0, j, tok] = 9.0
    for j, tok in enumerate([0, 6, 7]):
        logits[0, 1, j, tok] = 9.0
    per_position, tau = acceptance_stats(logits, t)
    assert per_position.tolist() == [0.5, 1.0, 0.5] and tau.item() == pytest.approx(2.0)


def test_lambda_schedule():
    assert lambda_at(0, 100, 1.0, 1.0, "linear") == 1.0
    assert lambda_at(50, 100, 1.0, 1.0, "linear") == pytest.approx(0.5)
    assert lambda_at(25, 100, 1.0, 0.5, "linear") == pytest.approx(0.5)
    assert lambda_at(80, 100, 1.0, 0.5, "linear") == 0.0
    assert lambda_at(80, 100, 0.3, 1.0, "none") == 0.3
    with pytest.raises(ValueError, match="unknown curriculum"):
        lambda_at(0, 1, 1.0, 1.0, "cosine")


def test_warmup_then_cosine():
    lrs = [warmup_cosine(s, 100, 0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0) and lrs[55] == pytest.approx(0.5, abs=0.02) and lrs[-1] < 0.01
