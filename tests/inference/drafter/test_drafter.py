import pytest
import torch

from inference import DominoDrafter, DraftKVCache, load_target
from inference.kernels.linear import MeasuredLinear, kernel_unavailable_reason


def test_decoding_path_equals_the_training_path(any_tiny_target, make_drafter):
    target = any_tiny_target
    drafter = make_drafter(target)
    ids = torch.randint(0, 500, (1, 30))
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    anchors = torch.tensor([[6, 17, 25]])
    with torch.no_grad():
        train = drafter.forward_blocks(feats, ids, anchors)
        for i, a in enumerate(anchors[0].tolist()):
            cache = drafter.new_cache(1, capacity=4)  # small: exercises growth
            drafter.append_context(cache, feats[:, : a // 2])  # committed over two rounds
            drafter.append_context(cache, feats[:, a // 2 : a])
            decode = drafter.draft_block(cache, ids[:, a])
            torch.testing.assert_close(decode[0], train[0, i], rtol=1e-5, atol=1e-5)


def test_blocks_of_many_sequences_equal_each_sequences_own_block(any_tiny_target, make_drafter):
    """`draft_blocks`: one forward over caches of different lengths, some with features waiting, gives what
    `draft_block` gives each cache alone."""
    target = any_tiny_target
    drafter = make_drafter(target)
    ids = torch.randint(0, 500, (3, 30), generator=torch.Generator().manual_seed(0))
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    cuts = [(7, 9), (20, 20), (12, 25)]  # (projected, then waiting): the caches end at 9, 20 and 25

    def caches():
        made = []
        for r, (projected, end) in enumerate(cuts):
            cache = drafter.new_cache(1, capacity=8)
            drafter.append_context(cache, feats[r : r + 1, :projected])
            if end > projected:
                drafter.append_context(cache, feats[r : r + 1, projected:end], defer=True)
            made.append(cache)
        return made

    roots = ids[:, 29]
    with torch.no_grad():
        alone = [drafter.draft_block(cache, roots[r : r + 1]) for r, cache in enumerate(caches())]
        together_caches = caches()
        together = drafter.draft_blocks(together_caches, roots)
    torch.testing.assert_close(together, torch.cat(alone), rtol=1e-5, atol=1e-5)
    assert [c.length for c in together_caches] == [end for _, end in cuts]
    assert not any(c.pending for c in together_caches)


def test_draft_cache_holds_only_context():
    cache = DraftKVCache(2, 1, 2, 4, capacity=2, dtype=torch.float32, device="cpu")
    kv = [(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)) for _ in range(2)]
    cache.extend(kv)
    assert cache.length == 3 and cache.capacity >= 3
    torch.testing.assert_close(cache.layer(1)[0], kv[1][0])
    cache.crop(1)
    assert cache.layer(0)[0].shape[2] == 1
    with pytest.raises(ValueError):
        cache.crop(2)


def test_shift_label_drafts_the_whole_block(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, shift_label=True)
    assert drafter.config.num_draft_tokens == drafter.config.block_size
    hidden = torch.randn(2, drafter.config.block_size, drafter.config.hidden_size)
    assert torch.equal(drafter.draft_hidden_slice(hidden), hidden)
    plain = make_drafter(qwen_target)
    assert torch.equal(plain.draft_hidden_slice(hidden), hidden[:, 1:])


def test_target_modules_are_not_parameters_of_the_drafter(drafter, qwen_target):
    names = set(drafter.state_dict())
    assert not any("embed" in n and "embed_proj" not in n for n in names)
    assert not any("lm_head" in n for n in names)
    params = {id(p) for p in drafter.parameters()}
    assert id(qwen_target.embed_tokens.weight) not in params


def test_binding_errors(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target)
    unbound = DominoDrafter(drafter.config)
    with pytest.raises(RuntimeError, match="bind_target"):
        unbound.embed(torch.tensor([1]))
    with pytest.raises(ValueError, match="belongs to another target"):
        unbound.bind_target(torch.nn.Embedding(10, 64), torch.nn.Linear(64, 10))


def test_scaled_rope_types_come_from_transformers(qwen_target, make_drafter):
    rope = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    drafter = make_drafter(qwen_target, rope_parameters=rope)
    default = make_drafter(qwen_target, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    inv, inv_default = drafter.backbone.rotary.inv_freq, default.backbone.rotary.inv_freq
    assert inv.shape == inv_default.shape and inv[0] == inv_default[0] and inv[-1] < inv_default[-1]
    with torch.device("meta"):  # the table is built for real even when the model is on meta
        assert DominoDrafter(drafter.config).backbone.rotary.inv_freq.device.type == "cpu"


def test_rope_table_stays_fp32_under_a_dtype_cast(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target)
    positions = torch.arange(300).unsqueeze(0)
    cos, _ = drafter.backbone.rotary(positions, torch.float32)
    drafter.to(torch.bfloat16)
    assert drafter.backbone.rotary.inv_freq.dtype == torch.float32
    cos_after, _ = drafter.backbone.rotary(positions, torch.float32)
    assert torch.equal(cos, cos_after)


def test_from_pretrained_binds_to_a_target(qwen_target, make_drafter, tmp_path):
    make_drafter(qwen_target).save_pretrained(tmp_path, dtype=torch.float32)
    loaded = DominoDrafter.from_pretrained(tmp_path, target=qwen_target)
    assert loaded.embed(torch.tensor([3])).shape == (1, 64)
    assert next(loaded.parameters()).dtype == qwen_target.dtype


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("draft_vocab_size", [None, 64])
def test_a_drafter_on_a_prepacked_target_is_packed_and_drafts_the_same(make_drafter, tmp_path, draft_vocab_size, dtype):
    if kernel_unavailable_reason("onednn", dtype) is not None:
        pytest.skip(f"no prepacked {dtype} linears here")
    plain_target = load_target("tiny-qwen3", dtype=dtype, device="cpu", prepack=False)
    packed_target = load_target("tiny-qwen3", dtype=dtype, device="cpu", prepack=True)
    drafter = make_drafter(plain_target, draft_vocab_size=draft_vocab_size)
    if draft_vocab_size:
        drafter.vocab.set_ids(torch.arange(draft_vocab_size) * 3)
    drafter.save_pretrained(tmp_path)
    plain = DominoDrafter.from_pretrained(tmp_path, target=plain_target)
    packed = DominoDrafter.from_pretrained(tmp_path, target=packed_target)
    assert plain.prepacked_linears == 0
    linears = sum(isinstance(m, MeasuredLinear) for m in packed.modules())
    assert packed.prepacked_linears == linears + 2 > 2  # + the GRU's two weights
    assert packed.head.packed_gru is not None and plain.head.packed_gru is None
    assert not any(type(m) is torch.nn.Linear for m in packed.modules())
    features = torch.randn(1, 9, plain.config.num_context_features * 64, generator=torch.Generator().manual_seed(0))
    drafts = []
    with torch.inference_mode():
        for model in (plain, packed):
            cache = model.new_cache(1, 64)
            model.append_context(cache, features.to(getattr(torch, dtype)))
            hidden = model.draft_block(cache, torch.tensor([[5]]))
            causal = torch.tensor([[5, 7, 9]])
            drafts.append(model.block_logits(hidden, causal).final)
            state = model.head.init_state(2, "cpu", getattr(torch, dtype)) + 0.5
            drafts.append(
                model.head.step(model.embed(torch.tensor([5, 7])), model.head.step(model.embed(causal[0, :2]), state))
            )
    assert drafts[0].shape[-1] == (draft_vocab_size or plain.config.vocab_size)
    for plain_out, packed_out in (drafts[0::2], drafts[1::2]):
        if dtype == "bfloat16" and torch.backends.cpu.get_cpu_capability() == "AVX512":  # bit-identical there
            assert torch.equal(plain_out, packed_out)
        torch.testing.assert_close(plain_out, packed_out)
