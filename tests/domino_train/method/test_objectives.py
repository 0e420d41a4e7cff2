import math

import pytest
import torch

from domino_train.method.objectives import (
    acceptance_stats,
    block_targets,
    lambda_at,
    restrict_to_draft_vocab,
    sample_anchors,
    warmup_cosine,
)
from inference.drafter.draft_vocab import DraftVocab


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


def test_distilled_labels_are_the_targets_choices_while_the_text_agrees():
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11]])
    mask = torch.ones_like(ids)
    # The target's greedy next token after each position: it agrees with the text at positions 0..2
    # (predicting 6, 7, 8), then after position 3 it would say 42 where the text says 9.
    next_ids = torch.tensor([[6, 7, 8, 42, 10, 11, 12]])
    t = block_targets(ids, mask, torch.tensor([[1]]), num_draft=4, gamma=7.0, next_ids=next_ids)
    assert t.labels[0, 0].tolist() == [7, 8, 42, 0]  # labels: next_ids[a + j - 1]
    assert t.valid[0, 0].tolist() == [True, True, True, False]  # unknown past the first disagreement
    assert t.causal_tokens[0, 0].tolist() == [6, 7, 8, 9]
    # On text the target wrote itself (next_ids = the text shifted) both rules agree.
    own = torch.cat([ids[:, 1:], torch.tensor([[0]])], 1)
    a, b = (block_targets(ids, mask, torch.tensor([[0, 2]]), 4, 7.0, n) for n in (None, own))
    assert torch.equal(a.labels, b.labels) and torch.equal(a.valid, b.valid)


def test_labels_outside_the_draft_vocabulary_weigh_zero_but_count_as_misses():
    ids = torch.arange(0, 8).unsqueeze(0)
    t = block_targets(ids, torch.ones(1, 8, dtype=torch.long), torch.tensor([[0]]), 3, 7.0)  # labels 1, 2, 3
    vocab = DraftVocab(torch.nn.Module(), 2, 8)
    vocab.set_ids(torch.tensor([1, 3]))  # draft id 0 -> target 1, draft id 1 -> target 3
    r = restrict_to_draft_vocab(t, vocab)
    assert r.labels[0, 0].tolist() == [0, 0, 1] and r.in_vocab[0, 0].tolist() == [True, False, True]
    assert r.weights[0, 0, 1] == 0 and r.weights[0, 0, 0] > 0
    logits = torch.full((1, 1, 3, 2), -9.0)
    logits[0, 0, :, 0] = 9.0  # always drafts target id 1: right, then (target 2 is unreachable) wrong
    per_position, tau = acceptance_stats(logits.argmax(-1), r)
    assert per_position.tolist() == [1.0, 0.0, 0.0] and tau.item() == 2.0


def test_acceptance_stats():
    ids = torch.arange(0, 10).unsqueeze(0)
    t = block_targets(ids, torch.ones(1, 10, dtype=torch.long), torch.tensor([[0, 4]]), 3, 7.0)
    logits = torch.full((1, 2, 3, 10), -9.0)
    # block 0 (labels 1,2,3): right, right, wrong -> tau 3; block 1 (labels 5,6,7): wrong first -> tau 1
    for j, tok in enumerate([1, 2, 0]):
        logits[0, 0, j, tok] = 9.0
    for j, tok in enumerate([0, 6, 7]):
        logits[0, 1, j, tok] = 9.0
    per_position, tau = acceptance_stats(logits.argmax(-1), t)
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
