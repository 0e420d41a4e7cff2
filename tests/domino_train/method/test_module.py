import torch

from domino_train.method.objectives import block_targets, sample_anchors


def _blocks(drafter, target, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 250, (2, 40), generator=g)
    mask = torch.ones_like(ids)
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    anchors = sample_anchors(mask, 5, g)
    t = block_targets(ids, mask, anchors, drafter.config.num_draft_tokens, 7.0)
    return drafter.forward_blocks(feats, ids, anchors), t


def test_ttt_is_teacher_forcing_on_the_drafters_own_greedy_drafts(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, block_size=6)
    with torch.no_grad():
        hidden, t = _blocks(drafter, qwen_target)
        ttt = drafter.rollout_logits(hidden, t.causal_tokens[..., 0])
        own = torch.cat([t.causal_tokens[..., :1], ttt.final.argmax(-1)[..., :-1]], dim=-1)
        tf_on_own = drafter.block_logits(hidden, own)
        tf_on_truth = drafter.block_logits(hidden, t.causal_tokens)
    torch.testing.assert_close(ttt.final, tf_on_own.final, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ttt.base, tf_on_truth.base)
    p = drafter.config.pure_draft_prefix_len
    assert torch.equal(ttt.final[..., :p, :], tf_on_truth.final[..., :p, :])  # base-only drafts: no GRU input
    assert not torch.allclose(ttt.final[..., p:, :], tf_on_truth.final[..., p:, :])  # own drafts != the truth


def test_ttt_gradients_flow_through_states_not_tokens(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, block_size=6)
    hidden, t = _blocks(drafter, qwen_target)
    out = drafter.rollout_logits(hidden, t.causal_tokens[..., 0])
    out.final[..., -1, :].logsumexp(-1).sum().backward()
    assert drafter.head.prefix_gru.weight_hh_l0.grad.abs().sum() > 0
