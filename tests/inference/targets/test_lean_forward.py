"""The lean engine (`inference.targets.lean_forward`) computes what HF's forward computes, on every call
decoding makes: prefill, one-token steps, chain windows, tree windows with their mask, left-padded batches;
and its static cache crops and compacts like transformers' cache. Models it cannot run are named."""

import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma3TextConfig, MistralConfig

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.tree.draft_tree import tree_attention_mask
from inference.kernels.attention import FOLD_MAX_QUERIES
from inference.targets.adapter import TargetModel
from inference.targets.engine import engine_report, install_engine
from inference.targets.lean_forward import lean_unavailable_reason
from inference.targets.static_cache import StaticKVCache
from inference.targets.tiny import tiny_target


def _pair(arch: str, folded: bool = False):
    """HF's forward and the lean engine on the same tiny model; `folded`: the lean engine attends folded at
    every few-query count (`kernels/attention.py`), as a measurement may choose."""
    eager = tiny_target(arch)
    lean = install_engine(tiny_target(arch), engine="lean", prepack=False)
    lean.lean.folded_queries = frozenset(range(1, FOLD_MAX_QUERIES + 1)) if folded else frozenset()
    return eager, lean


def _ids(n: int, seed: int, batch: int = 1) -> torch.Tensor:
    return torch.randint(0, 256, (batch, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("folded", [False, True])
@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_prefill_steps_and_windows_match_hf(arch, folded):
    eager, lean = _pair(arch, folded)
    assert lean.engine == "lean" and eager.engine == "hf"
    hf_cache, cache = eager.new_cache(), lean.new_cache(capacity=8)  # small: the static cache must grow
    assert isinstance(cache, StaticKVCache)
    layers = [0, 3, 5]
    for i, n in enumerate([11, 1, 1, 4, 1, 7]):
        ids = _ids(n, i)
        ref = eager(ids, cache=hf_cache, layer_ids=layers)
        out = lean(ids, cache=cache, layer_ids=layers)
        torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out.features, ref.features, rtol=1e-5, atol=1e-5)
        assert lean.cache_length(cache) == eager.cache_length(hf_cache)
    last = lean(_ids(1, 99), cache=cache, last_logits_only=True).logits
    assert last.shape == (1, 1, eager.config.vocab_size)


@pytest.mark.parametrize("folded", [False, True])
@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_a_tree_window_and_its_compaction_match_hf(arch, folded):
    eager, lean = _pair(arch, folded)
    hf_cache, cache = eager.new_cache(), lean.new_cache()
    prompt = _ids(9, 1)
    eager(prompt, cache=hf_cache)
    lean(prompt, cache=cache)
    # root, two children of the root, a grandchild under the second child
    visible = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]], dtype=torch.bool)
    positions = torch.tensor([[9, 10, 10, 11]])
    mask = tree_attention_mask(9, visible, torch.float32)
    window = _ids(4, 2)
    ref = eager(window, cache=hf_cache, position_ids=positions, attention_mask=mask)
    out = lean(window, cache=cache, position_ids=positions, attention_mask=mask)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    keep = torch.tensor([0, 2, 3])
    eager.compact_cache(hf_cache, 9, keep)
    lean.compact_cache(cache, 9, keep)
    nxt = _ids(1, 3)
    torch.testing.assert_close(lean(nxt, cache=cache).logits, eager(nxt, cache=hf_cache).logits, rtol=1e-5, atol=1e-5)


def test_a_left_padded_batch_matches_hf_and_drops_rows():
    eager, lean = _pair("llama")
    ids = _ids(6, 4, batch=2)
    attn = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    hf_cache, cache = eager.new_cache(), lean.new_cache()
    ref = eager(ids, cache=hf_cache, position_ids=positions, attention_mask=attn)
    out = lean(ids, cache=cache, position_ids=positions, attention_mask=attn)
    torch.testing.assert_close(out.logits[:, 2:], ref.logits[:, 2:], rtol=1e-5, atol=1e-5)  # the real tokens
    cache.batch_select_indices(torch.tensor([1]))
    hf_cache.batch_select_indices(torch.tensor([1]))
    step = _ids(1, 5)
    kwargs = dict(position_ids=torch.tensor([[6]]), attention_mask=torch.ones(1, 7, dtype=torch.long))
    torch.testing.assert_close(
        lean(step, cache=cache, **kwargs).logits, eager(step, cache=hf_cache, **kwargs).logits, rtol=1e-5, atol=1e-5
    )


def test_the_static_cache_crops_compacts_and_refuses_to_grow_by_crop():
    cache = StaticKVCache(num_layers=2, kv_heads=1, head_dim=1, dtype=torch.float32, device="cpu", capacity=4)
    keys = torch.arange(6, dtype=torch.float32).view(1, 1, 6, 1)
    cache.reserve(1, 6)
    with torch.inference_mode():  # as the forward that writes it runs
        for layer in range(2):
            cache.write(layer, 0, keys, -keys)
    cache.length = 6
    assert cache.capacity >= 6
    cache.compact(2, torch.tensor([0, 3]))
    assert cache.length == 4 and cache.keys[1, 0, 0, :4, 0].tolist() == [0, 1, 2, 5]
    assert cache.values[0, 0, 0, :4, 0].tolist() == [0, -1, -2, -5]
    with pytest.raises(ValueError, match="cannot crop"):
        cache.crop(5)
    with pytest.raises(ValueError, match="batch size 1"):
        cache.reserve(2, 4)


def _tiny(config_cls, **kw):
    common = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    config = config_cls(**common, num_attention_heads=2, num_key_value_heads=1, head_dim=16, **kw)
    return AutoModelForCausalLM.from_config(config)


def test_models_the_lean_engine_cannot_run_are_named_and_fall_back_to_hf(caplog):
    assert lean_unavailable_reason(_tiny(MistralConfig, sliding_window=24)) is None  # one window for every layer
    assert lean_unavailable_reason(_tiny(MistralConfig, sliding_window=None)) is None
    gemma = _tiny(Gemma3TextConfig, sliding_window=16)
    reason = lean_unavailable_reason(gemma)
    assert reason is not None and "gemma3_text" in reason
    target = TargetModel(gemma, name="tiny-gemma3")
    with pytest.raises(ValueError, match="engine=lean cannot run target tiny-gemma3: model type"):
        install_engine(target, engine="lean", prepack=False)
    install_engine(target, engine="auto", prepack=False)
    assert target.engine == "hf" and "runs on Hugging Face's eager forward: model type" in caplog.text
    assert engine_report(target)["engine"] == "hf"


def _mistral(window: int):
    torch.manual_seed(0)
    common = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=4, head_dim=16)
    config = MistralConfig(
        **common, num_attention_heads=4, num_key_value_heads=2, sliding_window=window, max_position_embeddings=512
    )
    config._attn_implementation = "sdpa"
    return TargetModel(AutoModelForCausalLM.from_config(config), name=f"tiny-mistral-w{window}", mask_token_id=299)


def test_a_sliding_window_target_decodes_past_its_window_like_hf(make_drafter):
    """Every method on the lean engine emits HF's eager `ar` tokens, 30 tokens past an 8-token window."""
    eager, lean = _mistral(8), install_engine(_mistral(8), engine="lean", prepack=False)
    assert lean.lean.window == 8
    ids = _ids(20, 7)
    hf_cache, cache = eager.new_cache(), lean.new_cache()
    torch.testing.assert_close(lean(ids, cache=cache).logits, eager(ids, cache=hf_cache).logits, rtol=1e-5, atol=1e-5)
    options = DecodeOptions(stop_token_ids=[])
    prompt = list(range(5, 17))
    expected = build_decoder("ar", eager, options=options).generate(prompt, 30).tokens
    drafter = make_drafter(lean, block_size=4)
    for method in ("ar", "dflash", "domino", "ddtree", "dominotree"):
        decoder = build_decoder(method, lean, None if method == "ar" else drafter, options, TreeOptions(budget=6))
        assert decoder.generate(prompt, 30).tokens == expected, method
