"""Sliding-window targets (`inference.targets.sliding_window`): targets whose sliding and full layers
alternate (Gemma 3, Gemma 2, Qwen2 with `max_window_layers`) run on HF's forward over a cache that keeps
every entry, and every method decodes past the window exactly as a full forward without a cache does."""

import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma2Config, Gemma3TextConfig, MistralConfig, Qwen2Config

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.targets.adapter import TargetModel
from inference.targets.engine import install_engine
from inference.targets.sliding_window import FULL, SLIDING, hf_attention_mask, window_mask

WINDOW = 16
MIXED = [SLIDING, FULL, SLIDING, FULL]
TARGETS = {  # config class, attention, engine, config fields
    "gemma3": (Gemma3TextConfig, "sdpa", "auto", {"layer_types": MIXED}),
    "gemma2": (Gemma2Config, "eager", "auto", {"layer_types": MIXED}),  # softcapping: no SDPA
    "qwen2-max-window-layers": (Qwen2Config, "sdpa", "auto", {"use_sliding_window": True, "max_window_layers": 2}),
    "mistral-on-hf": (MistralConfig, "sdpa", "hf", {}),  # every layer slides; the lean engine's case on HF
}


def _target(name: str, make_config) -> TargetModel:
    config_cls, attention, engine, fields = TARGETS[name]
    config = make_config(config_cls, sliding_window=WINDOW, **fields)
    config._attn_implementation = attention
    torch.manual_seed(0)
    target = TargetModel(AutoModelForCausalLM.from_config(config), name=f"tiny-{name}", mask_token_id=299)
    return install_engine(target, engine=engine, prepack=False)


def _greedy_without_cache(target: TargetModel, prompt: list[int], n: int) -> list[int]:
    """The reference: each token from a full forward over everything so far (HF's own sliding masks)."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, target.model(ids).logits[:, -1:].argmax(-1)], dim=1)
    return ids[0, len(prompt) :].tolist()


@pytest.mark.parametrize("name", list(TARGETS))
def test_every_method_decodes_past_the_window_like_a_full_forward(name, make_drafter, make_tiny_config):
    target = _target(name, make_tiny_config)
    assert target.engine == "hf"
    prompt = list(range(5, 17))
    expected = _greedy_without_cache(target, prompt, 3 * WINDOW)
    options = DecodeOptions(stop_token_ids=[])
    drafter = make_drafter(target, block_size=4)
    for method in ("ar", "dflash", "domino", "ddtree", "dominotree"):
        decoder = build_decoder(method, target, None if method == "ar" else drafter, options, TreeOptions(budget=6))
        assert decoder.generate(prompt, 3 * WINDOW).tokens == expected, method


def test_a_tree_mask_is_windowed_for_the_sliding_layers_only(make_tiny_config):
    tree = torch.zeros(1, 1, 2, 6)  # two tree nodes after 4 cached entries, both at depth 1 (position 4)
    positions = torch.tensor([[4, 4]])
    masks = hf_attention_mask(_target("gemma3", make_tiny_config).config, tree, positions, start=4)
    assert masks[FULL] is tree
    torch.testing.assert_close(masks[SLIDING], window_mask(tree, positions, 4, WINDOW, tree.dtype))
    windowed = window_mask(None, positions, 4, 2, torch.float32)  # window 2: position 4 sees positions 3 and 4
    assert (windowed[0, 0] == 0).tolist() == [[False, False, False, True, True, True]] * 2
    every_layer_slides = _target("mistral-on-hf", make_tiny_config).config
    assert hf_attention_mask(every_layer_slides, tree, positions, 4).shape == (1, 1, 2, 6)
