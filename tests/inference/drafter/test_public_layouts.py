"""Golden tests: every public drafter layout loads unchanged and decodes losslessly.

One test per published layout, each: the config text as published, shrunk to the tiny Qwen3 target's
shapes (hidden 64, 4 heads of 16, 2 KV heads, 6 target layers, vocab 512, 2 draft layers, a small head;
every field name and the structure kept), random weights under the published key names saved as
safetensors, `DominoDrafter.from_pretrained`, then greedy decoding that must equal the target alone.

Where each layout comes from (the shrunk texts: fixtures/public_layouts/specforge_<its file>, fork_causal_v5.json):
- `DFLASH_NO_SECTION`: sgl-project/SpecForge `configs/qwen3-8b-dflash.json`, a DFlash drafter config with
  no `dflash_config` (target_layer_ids and the MASK id are implied).
- `SPECFORGE_DOMINO`: sgl-project/SpecForge `configs/qwen3-8b-domino.json`: `DFlashDraftModel`,
  `emb_dim` at the top level and again in `dflash_config` with `projector_type: "domino"`, `shift_label`.
- `FORK_CAUSAL_V5`: the public Domino fork (jianuo-huang/Domino, SGLang
  `python/sglang/srt/speculative/dflash_utils.py` and `sglang_patch/domino_projector_alias.patch`): the
  fields its parser reads, `emb_dim` at the top level only and the head's older name
  `projector_type: "causal_v5"`; the Qwen3 fields as in SpecForge's Qwen3-8B configs (the fork
  publishes no config file, so this is the layout its reader accepts, not a copied file).
- `SPECFORGE_DOMINO_SECTION`: sgl-project/SpecForge `configs/qwen3.5-4b-domino.json`: `DominoDraftModel`,
  the head's fields in a separate `domino_config`.
Key names: SpecForge `specforge/modeling/draft/dflash.py` / `domino.py` (`layers.{i}...`, `fc`,
`hidden_norm`, `norm`, `prefix_gru.weight_{ih,hh}_l0`, `embed_proj.{0,2}`), no embedding, no lm_head.
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from inference import DominoDrafter, DrafterCheckpointError, DrafterConfig
from inference.decoding import DecodeOptions, build_decoder

LAYOUTS = Path(__file__).parent / "fixtures" / "public_layouts"
DFLASH_NO_SECTION = (LAYOUTS / "specforge_qwen3-8b-dflash.json").read_text()
SPECFORGE_DOMINO = (LAYOUTS / "specforge_qwen3-8b-domino.json").read_text()
FORK_CAUSAL_V5 = (LAYOUTS / "fork_causal_v5.json").read_text()
SPECFORGE_DOMINO_SECTION = (LAYOUTS / "specforge_qwen3.5-4b-domino.json").read_text()


def _published_weights(cfg: dict, num_features: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random bf16 weights under the public key names, shaped from the config by hand (not by our model)."""
    gen = torch.Generator().manual_seed(seed)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, nq, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    shapes = {"fc.weight": (h, num_features * h), "hidden_norm.weight": (h,), "norm.weight": (h,)}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"layers.{layer}."
        shapes |= {
            p + "self_attn.q_proj.weight": (nq * hd, h),
            p + "self_attn.k_proj.weight": (nkv * hd, h),
            p + "self_attn.v_proj.weight": (nkv * hd, h),
            p + "self_attn.o_proj.weight": (h, nq * hd),
            p + "self_attn.q_norm.weight": (hd,),
            p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        }
    head = {**cfg, **cfg.get("dflash_config", {}), **cfg.get("domino_config", {})}
    if head.get("projector_type"):
        g, r = head["gru_hidden_dim"], head["emb_dim"]
        shapes |= {
            "prefix_gru.weight_ih_l0": (3 * g, h),
            "prefix_gru.weight_hh_l0": (3 * g, g),
            "embed_proj.0.weight": (r, h + g),
            "embed_proj.2.weight": (v, r),
        }
    out = {}
    for key, shape in shapes.items():
        t = torch.randn(shape, generator=gen)
        out[key] = (1 + 0.1 * t if len(shape) == 1 else 0.15 * t).to(torch.bfloat16)
    return out


def _publish(tmp_path, text: str, num_features: int = 2, drop: tuple[str, ...] = ()):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(text)
    weights = _published_weights(json.loads(text), num_features)
    save_file({k: w for k, w in weights.items() if k not in drop}, tmp_path / "model.safetensors")
    return tmp_path


def _assert_lossless(target, drafter):
    methods = ("dflash",) if drafter.head is None else ("dflash", "domino")
    for length, seed in ((1, 1), (13, 2)):
        prompt = torch.randint(0, 256, (length,), generator=torch.Generator().manual_seed(seed)).tolist()
        expected = build_decoder("ar", target, options=DecodeOptions()).generate(prompt, 24).tokens
        for method in methods:
            assert build_decoder(method, target, drafter, DecodeOptions()).generate(prompt, 24).tokens == expected


def test_dflash_without_dflash_config(qwen_target, tmp_path):
    path = _publish(tmp_path, DFLASH_NO_SECTION)
    drafter = DominoDrafter.from_pretrained(path, target=qwen_target)
    cfg = drafter.config
    assert cfg.head is None and cfg.block_size == 16 and cfg.shift_label is False
    assert cfg.target_layer_ids == [1, 3]  # round(1 + j * (6 - 4) / (2 - 1)): SpecForge's build_target_layer_ids
    assert cfg.mask_token_id == qwen_target.mask_token_id == 259  # the target's MASK, as serving stacks resolve it
    _assert_lossless(qwen_target, drafter)
    with pytest.raises(DrafterCheckpointError, match="mask_token_id is missing"):
        DominoDrafter.from_pretrained(path)  # vocab 512 implies no MASK id without the target


@pytest.mark.parametrize(
    "text", [SPECFORGE_DOMINO, FORK_CAUSAL_V5, SPECFORGE_DOMINO_SECTION], ids=["specforge", "fork", "section"]
)
def test_public_domino_layouts(qwen_target, tmp_path, text):
    path = _publish(tmp_path, text)
    drafter = DominoDrafter.from_pretrained(path, target=qwen_target)
    cfg = drafter.config
    assert (cfg.head, cfg.correction_rank, cfg.gru_hidden_dim) == ("domino", 8, 24)
    assert (cfg.pure_draft_prefix_len, cfg.shift_label, cfg.target_layer_ids, cfg.mask_token_id) == (
        1,
        True,
        [1, 3],
        259,
    )
    _assert_lossless(qwen_target, drafter)
    # Our export of it loads back as the same drafter, and a copy that lost its head is still refused.
    drafter.save_pretrained(tmp_path / "export")
    assert DominoDrafter.from_pretrained(tmp_path / "export").config == cfg
    with pytest.raises(DrafterCheckpointError, match="missing key embed_proj.2.weight"):
        DominoDrafter.from_pretrained(_publish(tmp_path / "headless", text, drop=("embed_proj.2.weight",)))


def test_the_published_qwen3_8b_configs_imply_the_design_values():
    """The unshrunk fields of SpecForge's Qwen3-8B configs give the values docs/design.md states."""
    dflash = json.loads(DFLASH_NO_SECTION) | dict(
        hidden_size=4096, head_dim=128, intermediate_size=12288, num_attention_heads=32, num_hidden_layers=5,
        num_key_value_heads=8, num_target_layers=36, vocab_size=151936, layer_types=["full_attention"] * 5,
    )  # fmt: skip
    cfg = DrafterConfig.from_hf_dict(dflash)
    assert (cfg.target_layer_ids, cfg.mask_token_id, cfg.head) == ([1, 9, 17, 25, 33], 151669, None)
    domino = dflash | {"emb_dim": 256}
    domino["dflash_config"] = json.loads(SPECFORGE_DOMINO)["dflash_config"] | dict(
        mask_token_id=151669, target_layer_ids=[1, 9, 17, 25, 33], emb_dim=256, gru_hidden_dim=1024
    )
    cfg = DrafterConfig.from_hf_dict(domino)
    assert (cfg.head, cfg.correction_rank, cfg.gru_hidden_dim, cfg.shift_label) == ("domino", 256, 1024, True)


def test_exports_carry_what_the_public_readers_read(qwen_target, make_drafter, tmp_path):
    """The fields each public reader requires, in the places it reads them."""
    make_drafter(qwen_target).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    section = cfg["dflash_config"]
    assert cfg["architectures"] == ["DFlashDraftModel"] and cfg["model_type"] == "qwen3"
    # the public Domino fork's SGLang parser: emb_dim at the top level, gru_hidden_dim in dflash_config,
    # projector_type one of its Domino names
    assert (
        cfg["emb_dim"] == 8 and section["gru_hidden_dim"] == 24 and section["projector_type"] in ("domino", "causal_v5")
    )
    # SpecForge's DominoDraftModel: emb_dim and gru_hidden_dim in dflash_config; both: the layer ids and MASK
    assert section["emb_dim"] == 8 and isinstance(section["shift_label"], bool)
    assert section["target_layer_ids"] == [1, 3] and section["mask_token_id"] == 259
    assert cfg["block_size"] == 4 and cfg["num_target_layers"] == 6
    assert len(cfg["layer_types"]) == cfg["num_hidden_layers"]
