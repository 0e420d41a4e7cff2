"""`load_target` on local folders: a model without SDPA loads with eager attention, and a folder that exists
but does not load says what failed (one line), never that it does not exist."""

import functools

import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma2Config

from inference import load_target, load_target_config, tiny_target


def test_a_target_without_sdpa_loads_with_eager_attention(tmp_path, make_tiny_config):
    config = make_tiny_config(Gemma2Config)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "gemma2")
    target = load_target(str(tmp_path / "gemma2"), dtype="float32", device="cpu", mask_token_id=299)
    assert target.model.config._attn_implementation == "eager"  # Gemma 2's softcapping has no SDPA path
    assert target(torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, 300)
    tiny_target("llama").model.save_pretrained(tmp_path / "llama")
    llama = load_target(str(tmp_path / "llama"), dtype="float32", device="cpu", engine="hf", mask_token_id=511)
    assert llama.model.config._attn_implementation == "sdpa"  # where the model has it
    eager = load_target(str(tmp_path / "llama"), dtype="float32", device="cpu", attn_implementation="eager")
    assert eager.model.config._attn_implementation == "eager"


def test_a_folder_that_exists_but_does_not_load_says_what_failed(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    for load in (load_target, load_target_config, functools.partial(load_target, device="meta")):
        with pytest.raises(ValueError) as info:
            load(str(tmp_path))
        message = str(info.value)
        assert message.count("the local folder does not load") == 1 and "not a valid JSON" in message, message
        assert "neither a built-in" not in message and "\n" not in message
    with pytest.raises(ValueError, match="neither a built-in .* an existing local folder"):
        load_target(str(tmp_path / "missing"))
