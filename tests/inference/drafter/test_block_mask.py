import warnings

import torch

from inference.drafter.block_mask import anchor_block_mask

ANCHORS = torch.tensor([[4, 10, 15]])


def _setup(make_drafter, target, t=24):
    torch.manual_seed(1)
    drafter = make_drafter(target)
    ids = torch.randint(0, 500, (1, t))
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    return drafter, ids, feats


def test_mask_layout():
    m = anchor_block_mask(torch.tensor([[2, -1]]), context_len=5, block_size=3)[0, 0]
    assert m.shape == (6, 5 + 6)
    assert m[:3, :2].all() and not m[:3, 2:5].any()  # block of anchor 2 sees context 0, 1 only
    assert m[:3, 5:8].all() and not m[:3, 8:].any()  # its own block, not the other
    assert not m[3:, :5].any() and m[3:, 8:].all()  # padding block: only itself


def test_context_at_or_after_the_anchor_is_invisible(qwen_target, make_drafter):
    drafter, ids, feats = _setup(make_drafter, qwen_target)
    ref = drafter.forward_blocks(feats, ids, ANCHORS)
    for pos in (10, 11, 20):  # at / after anchor 10
        f = feats.clone()
        f[0, pos] += 3.0
        out = drafter.forward_blocks(f, ids, ANCHORS)
        assert torch.equal(out[0, 1], ref[0, 1]), pos
    f = feats.clone()
    f[0, 9] += 3.0  # strictly before anchor 10: visible
    out = drafter.forward_blocks(f, ids, ANCHORS)
    assert not torch.allclose(out[0, 1], ref[0, 1])
    assert torch.equal(out[0, 0], ref[0, 0])  # anchor 4 does not see position 9


def test_blocks_are_blind_to_each_other(qwen_target, make_drafter):
    drafter, ids, feats = _setup(make_drafter, qwen_target)
    ref = drafter.forward_blocks(feats, ids, ANCHORS)
    ids2 = ids.clone()
    ids2[0, 15] = (ids[0, 15] + 1) % 500  # the root token of the third block only
    out = drafter.forward_blocks(feats, ids2, ANCHORS)
    assert torch.equal(out[0, :2], ref[0, :2])
    assert not torch.allclose(out[0, 2], ref[0, 2])


def test_attention_inside_a_block_is_bidirectional(qwen_target, make_drafter):
    drafter, ids, feats = _setup(make_drafter, qwen_target)
    bb, bs = drafter.backbone, drafter.config.block_size
    fused = bb.fuse(feats)
    ctx = bb.context_kv(fused, torch.arange(feats.shape[1]).unsqueeze(0))
    mask = anchor_block_mask(ANCHORS, feats.shape[1], bs)
    positions = (ANCHORS.unsqueeze(-1) + torch.arange(bs)).view(1, -1)
    embeds = torch.randn(1, ANCHORS.shape[1] * bs, fused.shape[-1])
    ref = bb(embeds, positions, ctx, mask)
    e2 = embeds.clone()
    e2[0, bs + bs - 1] += 1.0  # last slot of the second block
    out = bb(e2, positions, ctx, mask)
    assert not torch.allclose(out[0, bs], ref[0, bs])  # its first slot sees it
    assert torch.equal(out[0, :bs], ref[0, :bs]) and torch.equal(out[0, 2 * bs :], ref[0, 2 * bs :])


def test_flex_attention_agrees_with_sdpa(qwen_target, make_drafter):
    drafter, ids, feats = _setup(make_drafter, qwen_target)
    anchors = torch.tensor([[4, 10, -1]])
    with warnings.catch_warnings(), torch.no_grad():  # flex has no CPU backward; training uses it on GPU
        warnings.simplefilter("ignore")
        flex = drafter.forward_blocks(feats, ids, anchors, use_flex=True)
        sdpa = drafter.forward_blocks(feats, ids, anchors)
    torch.testing.assert_close(flex[:, :2], sdpa[:, :2], rtol=1e-4, atol=1e-5)


def test_anchor_groups_compute_what_the_dense_mask_computes(qwen_target, make_drafter):
    drafter, _, _ = _setup(make_drafter, qwen_target)
    torch.manual_seed(2)
    ids = torch.randint(0, 500, (2, 24))
    feats = qwen_target(ids, layer_ids=drafter.config.target_layer_ids).features
    anchors = torch.tensor([[1, 4, 10, 15, 19], [3, 6, 7, -1, -1]])  # ascending, padding last
    dense = drafter.forward_blocks(feats, ids, anchors)
    dense.square().sum().backward()
    layers = [p for p in drafter.backbone.parameters() if p.grad is not None]
    dense_grads = [p.grad.clone() for p in layers]
    drafter.zero_grad()
    for groups in (2, 3, 5, 9):
        out = drafter.forward_blocks(feats, ids, anchors, anchor_groups=groups)
        torch.testing.assert_close(out[anchors >= 0], dense[anchors >= 0], rtol=1e-5, atol=1e-5)
        out.square().sum().backward()
        for p, g in zip(layers, dense_grads, strict=True):
            torch.testing.assert_close(p.grad, g, rtol=1e-3, atol=1e-4)  # fp32 sums in another order
        drafter.zero_grad()


def test_a_group_sees_no_context_past_its_last_anchor():
    from inference.drafter.block_mask import anchor_block_groups

    anchors = torch.tensor([[2, 5, 9, 12], [1, 3, -1, -1]])
    groups = anchor_block_groups(anchors, context_len=16, block_size=2, num_groups=2)
    assert [(g.slots, g.context_len) for g in groups] == [(slice(0, 4), 5), (slice(4, 8), 12)]
    dense = anchor_block_mask(anchors, 16, 2)
    for g in groups:  # the dense mask's rows of the group: nothing visible past the group's context
        rows = dense[:, :, g.slots]
        assert not rows[..., g.context_len : 16].any()
        assert torch.equal(g.mask[..., : g.context_len], rows[..., : g.context_len])
