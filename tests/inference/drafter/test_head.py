import pytest
import torch


def _blocks(drafter, target, n=3):
    torch.manual_seed(2)
    ids = torch.randint(0, 500, (1, 20))
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    anchors = torch.tensor([[3, 8, 12]])[:, :n]
    hidden = drafter.forward_blocks(feats, ids, anchors)
    d = drafter.config.num_draft_tokens
    causal = torch.stack([ids.gather(1, anchors + k) for k in range(d)], -1)  # ground-truth block tokens
    return hidden, causal


@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_pure_draft_prefix_uses_base_logits(qwen_target, prefix, make_drafter):
    drafter = make_drafter(qwen_target, pure_draft_prefix_len=prefix)
    hidden, causal = _blocks(drafter, qwen_target)
    out = drafter.block_logits(hidden, causal)
    assert torch.equal(out.final[..., :prefix, :], out.base[..., :prefix, :])
    assert not torch.isclose(out.final[..., prefix:, :], out.base[..., prefix:, :]).all(-1).any()


def test_draft_j_sees_only_tokens_before_it(drafter, qwen_target):
    hidden, causal = _blocks(drafter, qwen_target)
    ref = drafter.block_logits(hidden, causal).final
    c2 = causal.clone()
    c2[..., 1] = (c2[..., 1] + 7) % 500  # draft token 1, consumed before draft 2 (logits index 1)
    out = drafter.block_logits(hidden, c2).final
    assert torch.equal(out[..., :1, :], ref[..., :1, :])
    assert not torch.allclose(out[..., 1, :], ref[..., 1, :])


def test_zero_correction_weights_give_base_exactly(drafter, qwen_target):
    torch.nn.init.zeros_(drafter.head.embed_proj[2].weight)
    hidden, causal = _blocks(drafter, qwen_target)
    out = drafter.block_logits(hidden, causal)
    assert torch.equal(out.final, out.base)


def test_gru_step_matches_the_sequence_encoder(drafter):
    head = drafter.head
    x = torch.randn(3, 5, drafter.config.hidden_size)
    states = head.encode(x)
    s = head.init_state(3, "cpu", torch.float32)
    for j in range(5):
        s = head.step(x[:, j], s)
        torch.testing.assert_close(s, states[:, j], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_first_step_skips_the_zero_state_bit_for_bit(drafter, dtype):
    head = drafter.head.to(dtype)
    x = torch.randn(6, drafter.config.hidden_size, dtype=dtype) * 3
    x[0] = 0.0  # zero gates: the signed zeros of the shortcut match the full step's too
    full = head.step(x, head.init_state(6, "cpu", dtype))
    assert torch.equal(head.first_step(x), full)
    assert torch.equal(head.first_step_projected(head.input_projection(x)), full)


def test_candidate_correction_equals_gathered_full_correction(drafter):
    head = drafter.head
    h = torch.randn(4, drafter.config.hidden_size)
    s = torch.randn(4, drafter.config.gru_hidden_dim)
    full = head.correction(h, s)
    shared = torch.tensor([5, 3, 400, 17])
    torch.testing.assert_close(head.correction(h, s, shared), full[:, shared])
    per_row = torch.randint(0, 500, (4, 6))
    torch.testing.assert_close(head.correction(h, s, per_row), full.gather(1, per_row))


def test_dflash_drafter_final_is_base(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, head=None)
    hidden, _ = _blocks(drafter, qwen_target)
    out = drafter.block_logits(hidden)
    assert out.final is out.base


def test_gradients_reach_head_and_backbone_not_target(drafter, qwen_target):
    hidden, causal = _blocks(drafter, qwen_target)
    out = drafter.block_logits(hidden, causal)
    (out.final.logsumexp(-1).sum() + out.base.logsumexp(-1).sum()).backward()
    for name, p in drafter.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert all(p.grad is None for p in qwen_target.model.parameters())
