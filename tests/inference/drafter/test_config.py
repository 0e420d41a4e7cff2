import logging

import pytest
import torch

from inference import DominoDrafter, DrafterConfig, default_target_layer_ids, load_target_config
from inference.targets.mask_token import QWEN3_MASK_TOKEN_ID
from inference.targets.tiny import tiny_target_config


def count(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize(
    "name, backbone_m, head_m",
    [("Qwen/Qwen3-8B", 1048.6, 55.9), ("Qwen/Qwen3-4B", 537.4, 50.8)],
)
def test_qwen3_drafters_on_meta_match_the_design(name, backbone_m, head_m):
    config = DrafterConfig.from_target_config(load_target_config(name))
    with torch.device("meta"):
        drafter = DominoDrafter(config)
    assert config.target_layer_ids == [1, 9, 17, 25, 33]
    assert config.mask_token_id == QWEN3_MASK_TOKEN_ID
    assert count(drafter.backbone) / 1e6 == pytest.approx(backbone_m, abs=0.1)
    assert count(drafter.head) / 1e6 == pytest.approx(head_m, abs=0.1)
    if name.endswith("8B"):  # DESIGN.md: GRU 15.7 M + W1 1.3 M + W2 38.9 M, ~5.3 % of the backbone
        assert count(drafter.head.prefix_gru) / 1e6 == pytest.approx(15.7, abs=0.05)
        assert count(drafter.head.embed_proj[0]) / 1e6 == pytest.approx(1.3, abs=0.05)
        assert count(drafter.head.embed_proj[2]) / 1e6 == pytest.approx(38.9, abs=0.05)
        assert 100 * count(drafter.head) / count(drafter.backbone) == pytest.approx(5.3, abs=0.1)


def test_dflash_drafter_has_no_head():
    config = DrafterConfig.from_target_config(load_target_config("Qwen/Qwen3-8B"), head=None)
    with torch.device("meta"):
        assert DominoDrafter(config).head is None
    assert config.to_hf_dict()["architectures"] == ["DFlashDraftModel"]


@pytest.mark.parametrize(
    "layers, n, expected",
    [(36, 5, [1, 9, 17, 25, 33]), (28, 5, [1, 7, 13, 19, 25]), (6, 2, [1, 3]), (36, 1, [18])],
)
def test_default_target_layer_ids(layers, n, expected):
    assert default_target_layer_ids(layers, n) == expected


def test_hf_dict_round_trip_and_public_fields():
    config = DrafterConfig.from_target_config(load_target_config("Qwen/Qwen3-8B"))
    d = config.to_hf_dict()
    assert d["architectures"] == ["DFlashDraftModel"] and d["model_type"] == "qwen3"  # the public spelling
    assert d["emb_dim"] == 256  # top level too: where the public Domino fork's SGLang parser reads it
    assert d["block_size"] == 16 and d["num_target_layers"] == 36 and d["torch_dtype"] == "bfloat16"
    assert d["dflash_config"] == {
        "mask_token_id": 151669,
        "target_layer_ids": [1, 9, 17, 25, 33],
        "projector_type": "domino",
        "emb_dim": 256,
        "gru_hidden_dim": 1024,
        "pure_draft_prefix_len": 1,
        "shift_label": False,
    }
    assert d["rope_theta"] == 1e6 and d["rope_parameters"]["rope_theta"] == 1e6
    assert DrafterConfig.from_hf_dict(d) == config


def test_public_dflash_config_without_projector_parses():
    d = DrafterConfig.from_target_config(load_target_config("Qwen/Qwen3-4B"), head=None).to_hf_dict()
    d["dflash_config"] = {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}  # as z-lab ships it
    config = DrafterConfig.from_hf_dict(d)
    assert config.head is None and config.shift_label is False and config.hidden_size == 2560


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(mask_token_id=10**6), "outside the vocabulary"),
        (dict(target_layer_ids=[1, 40]), "outside the target"),
        (dict(head="medusa"), "head must be"),
        (dict(bogus_field=1), "unknown DrafterConfig fields"),
    ],
)
def test_invalid_configs_are_rejected(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        DrafterConfig.from_target_config(load_target_config("Qwen/Qwen3-8B"), **kwargs)


def test_non_qwen_target_needs_an_explicit_mask_id():
    with pytest.raises(ValueError, match="pass mask_token_id"):
        DrafterConfig.from_target_config(load_target_config("tiny-llama"))


def test_the_default_rule_repeating_a_layer_is_said(caplog):
    """5 draft layers over a 4-layer target: the rule gives [1, 1, 1, 1, 1]; kept, with a warning."""
    shallow = tiny_target_config("llama", num_layers=4)
    with caplog.at_level(logging.WARNING):
        config = DrafterConfig.from_target_config(shallow, num_draft_layers=5, mask_token_id=500)
    assert config.target_layer_ids == [1, 1, 1, 1, 1]
    assert "[1, 1, 1, 1, 1] read the same target layer more than once (layer 1 x5) of a 4-layer target" in caplog.text
    caplog.clear()
    DrafterConfig.from_target_config(tiny_target_config("llama"), num_draft_layers=2, mask_token_id=500)  # [1, 3]
    assert "more than once" not in caplog.text
