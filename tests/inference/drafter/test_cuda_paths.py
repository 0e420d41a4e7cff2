"""The drafter's CUDA-only branches: the flex-attention training mask and bf16 casts on a GPU."""

import pytest
import torch

from inference import tiny_target

ANCHORS = torch.tensor([[4, 10, 15, -1], [2, 7, 20, 21]])

pytestmark = pytest.mark.gpu


def _on_cuda(make_drafter, dtype=torch.float32):
    target = tiny_target("qwen3", dtype=dtype)
    target.model.to("cuda")
    drafter = make_drafter(target).to("cuda", dtype)
    torch.manual_seed(1)
    ids = torch.randint(0, 500, (2, 32), device="cuda")
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    return drafter, ids, feats


def test_flex_block_mask_gives_the_sdpa_blocks_and_gradients_on_cuda(make_drafter):
    drafter, ids, feats = _on_cuda(make_drafter)
    anchors = ANCHORS.cuda()
    grads = []
    outs = []
    for flex in (True, False):
        drafter.zero_grad(set_to_none=True)
        out = drafter.forward_blocks(feats, ids, anchors, use_flex=flex)
        out[anchors >= 0].square().mean().backward()
        outs.append(out.detach())
        grads.append(drafter.backbone.layers[0].self_attn.q_proj.weight.grad.clone())
    torch.testing.assert_close(outs[0], outs[1], atol=2e-5, rtol=1e-4)  # padding blocks too: they see themselves
    torch.testing.assert_close(grads[0], grads[1], atol=2e-5, rtol=1e-3)


@torch.no_grad()
def test_flex_and_sdpa_agree_in_bf16_on_cuda(make_drafter):
    drafter, ids, feats = _on_cuda(make_drafter, torch.bfloat16)
    anchors = ANCHORS.cuda()
    flex = drafter.forward_blocks(feats, ids, anchors, use_flex=True)
    sdpa = drafter.forward_blocks(feats, ids, anchors, use_flex=False)
    assert flex.dtype == torch.bfloat16
    valid = anchors >= 0
    torch.testing.assert_close(flex[valid].float(), sdpa[valid].float(), atol=3e-2, rtol=3e-2)


def test_bf16_cast_on_cuda_keeps_rope_in_fp32_and_drafts_in_bf16(make_drafter):
    drafter, ids, feats = _on_cuda(make_drafter, torch.bfloat16)
    rotary = drafter.backbone.rotary
    assert rotary.inv_freq.dtype == torch.float32
    cos, _ = rotary(torch.arange(8, device="cuda").unsqueeze(0), torch.bfloat16)
    assert cos.dtype == torch.bfloat16 and cos.device.type == "cuda"
    assert rotary._inv_freq(cos.device).dtype == torch.float32
    cache = drafter.new_cache(1, 64)
    assert cache.keys[0].dtype == torch.bfloat16
    drafter.append_context(cache, feats[:1].float())  # features of another dtype are cast on entry
    hidden = drafter.draft_block(cache, ids[:1, -1])
    assert hidden.dtype == torch.bfloat16 and torch.isfinite(hidden.float()).all()
