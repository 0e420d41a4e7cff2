import copy
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from inference import DominoDrafter, DrafterCheckpointError, load_target_config


def _logits(drafter, target):
    torch.manual_seed(3)
    ids = torch.randint(0, 500, (1, 16))
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    anchors = torch.tensor([[2, 9]])
    hidden = drafter.forward_blocks(feats, ids, anchors)
    causal = torch.stack([ids.gather(1, anchors + k) for k in range(drafter.config.num_draft_tokens)], -1)
    return drafter.block_logits(hidden, causal if drafter.head is not None else None).final


@pytest.mark.parametrize("head", ["domino", None])
def test_round_trip_gives_identical_logits(qwen_target, tmp_path, head, make_drafter):
    drafter = make_drafter(qwen_target, head=head)
    drafter.save_pretrained(tmp_path, dtype=torch.float32)
    loaded = DominoDrafter.from_pretrained(tmp_path, target_config=qwen_target.config)
    loaded.bind_target(qwen_target.embed_tokens, qwen_target.lm_head)
    assert loaded.config.to_hf_dict() == drafter.config.to_hf_dict()
    with torch.no_grad():
        assert torch.equal(_logits(loaded, qwen_target), _logits(drafter, qwen_target))


def test_public_key_names_and_bf16_default(drafter, tmp_path):
    drafter.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    expected = {
        "fc.weight",
        "hidden_norm.weight",
        "norm.weight",
        "prefix_gru.weight_ih_l0",
        "prefix_gru.weight_hh_l0",
        "embed_proj.0.weight",
        "embed_proj.2.weight",
    }
    for i in range(2):
        expected |= {f"layers.{i}.self_attn.{p}_proj.weight" for p in "qkvo"}
        expected |= {f"layers.{i}.self_attn.q_norm.weight", f"layers.{i}.self_attn.k_norm.weight"}
        expected |= {f"layers.{i}.mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
        expected |= {f"layers.{i}.input_layernorm.weight", f"layers.{i}.post_attention_layernorm.weight"}
    assert set(tensors) == expected
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"] and cfg["torch_dtype"] == "bfloat16"
    assert cfg["emb_dim"] == cfg["dflash_config"]["emb_dim"] == 8
    loaded = DominoDrafter.from_pretrained(tmp_path)
    assert loaded.backbone.fc.weight.dtype == torch.bfloat16
    assert DominoDrafter.from_pretrained(tmp_path, dtype=torch.float32).backbone.fc.weight.dtype == torch.float32


@pytest.fixture
def saved(drafter, tmp_path):
    drafter.save_pretrained(tmp_path)
    return tmp_path


def _edit_weights(path, fn):
    tensors = load_file(path / "model.safetensors")
    fn(tensors)
    save_file(tensors, path / "model.safetensors")


def _edit_config(path, fn):
    cfg = json.loads((path / "config.json").read_text())
    fn(cfg)
    (path / "config.json").write_text(json.dumps(cfg))


def _reject(path, *messages, target_config=None):
    with pytest.raises(DrafterCheckpointError) as e:
        DominoDrafter.from_pretrained(path, target_config=target_config)
    for m in messages:
        assert m in str(e.value), str(e.value)


def test_missing_and_unexpected_keys_are_all_named(saved):
    def edit(t):
        del t["prefix_gru.weight_hh_l0"]
        del t["layers.1.mlp.up_proj.weight"]
        t["lm_head.weight"] = torch.zeros(2, 2, dtype=torch.bfloat16)

    _edit_weights(saved, edit)
    _reject(
        saved,
        "missing key layers.1.mlp.up_proj.weight",
        "missing key prefix_gru.weight_hh_l0",
        "unexpected key lm_head.weight",
        "embedding / lm_head",
    )


def test_a_domino_checkpoint_without_its_head_is_rejected(saved):
    _edit_weights(saved, lambda t: [t.pop(k) for k in list(t) if k.startswith(("prefix_gru", "embed_proj"))])
    _reject(saved, "missing key embed_proj.2.weight")


def test_wrong_shape(saved):
    _edit_weights(saved, lambda t: t.__setitem__("fc.weight", torch.zeros(64, 64, dtype=torch.bfloat16)))
    _reject(saved, "fc.weight: shape [64, 64] != expected [64, 128]")


def test_wrong_dtype(saved):
    _edit_weights(saved, lambda t: t.__setitem__("norm.weight", t["norm.weight"].half()))
    _reject(saved, "norm.weight: dtype float16 != config's bfloat16")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["dflash_config"].__setitem__("projector_type", "mlp"), "projector_type 'mlp'"),
        (
            lambda c: c.update(architectures=["DominoDraftModel"]) or c["dflash_config"].update(projector_type="mlp"),
            "architectures says DominoDraftModel but dflash_config.projector_type is 'mlp'",
        ),
        (
            lambda c: c["dflash_config"].pop("projector_type"),
            "unexpected key prefix_gru.weight_hh_l0 (a Domino head, but the config declares none",
        ),
        (lambda c: c.__setitem__("architectures", ["LlamaForCausalLM"]), "is not a drafter"),
        (lambda c: c.__setitem__("emb_dim", 16), "emb_dim differs between"),
        (lambda c: [c.pop("emb_dim"), c["dflash_config"].pop("emb_dim")], "a Domino drafter needs emb_dim"),
        (lambda c: c["dflash_config"].pop("gru_hidden_dim"), "a Domino drafter needs gru_hidden_dim"),
        (lambda c: c["dflash_config"].__setitem__("shift_label", 0), "shift_label must be true or false"),
        (lambda c: c["dflash_config"].__setitem__("use_bias_gate", True), "use_bias_gate=true"),
        (lambda c: c.__setitem__("layer_types", ["sliding_attention"] * 2), "only full_attention"),
        (lambda c: [c.pop("num_target_layers")], "num_target_layers is missing"),
        (lambda c: [c["dflash_config"].pop("mask_token_id")], "mask_token_id is missing"),
        (lambda c: c.pop("hidden_size"), "missing field 'hidden_size'"),
    ],
)
def test_bad_config(saved, edit, message):
    _edit_config(saved, edit)
    _reject(saved, message)


def test_mismatch_with_the_target_is_named(saved, qwen_target):
    other = copy.deepcopy(qwen_target.config)
    other.hidden_size, other.vocab_size, other.num_hidden_layers = 96, 200, 3
    _reject(
        saved,
        "hidden size 64 != target's 96",
        "vocab size 512 != target's 200",
        "num_target_layers 6 != target's 3 layers",
        "target_layer_ids [3] are beyond the target's 3 layers",
        "mask_token_id 259 is outside the target vocab",
        target_config=other,
    )
    _reject(saved, "hidden size 64 != target's 4096", target_config=load_target_config("Qwen/Qwen3-8B"))


def test_a_drafter_for_another_target_leads_with_the_cause_and_the_fix(saved, qwen_target):
    other = copy.deepcopy(qwen_target.config)
    other.hidden_size, other.num_hidden_layers = 96, 3
    with pytest.raises(DrafterCheckpointError) as e:
        DominoDrafter.from_pretrained(saved, target_config=other)
    assert str(e.value).startswith(
        f"{saved}: this drafter was trained for a target with hidden size 64 / 6 layers / vocab 512, not for this "
        "one (hidden size 96 / 3 layers / vocab 512): pass that target, or retrain the drafter for this one. "
        "Details: does not match the target: hidden size 64 != target's 96; "
    )


def test_corrupt_and_truncated_files(saved):
    weights = saved / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    _reject(saved, "corrupt or truncated")
    weights.write_bytes(b"\x00garbage" * 10)
    _reject(saved, "corrupt or truncated")
    (saved / "config.json").write_text("{not json")
    _reject(saved, "not valid JSON")


def test_missing_files(saved, tmp_path):
    _reject(tmp_path / "nowhere", "no such drafter folder")
    (saved / "model.safetensors").unlink()
    _reject(saved, "model.safetensors is missing")
    (saved / "config.json").unlink()
    _reject(saved, "config.json is missing")


def test_public_key_spellings_load_and_duplicates_are_refused(saved, drafter):
    """SGLang's optional `model.` prefix and early SpecForge Domino checkpoints' `logit_head.` head prefix."""

    def respell(t):
        for key in [k for k in t if k.startswith(("prefix_gru.", "embed_proj."))]:
            t["logit_head." + key] = t.pop(key)
        t["model.norm.weight"] = t.pop("norm.weight")

    _edit_weights(saved, respell)
    loaded = DominoDrafter.from_pretrained(saved, dtype=torch.float32)
    want = {k: v.to(torch.bfloat16).float() for k, v in drafter.state_dict().items()}
    assert all(torch.equal(v, want[k]) for k, v in loaded.state_dict().items())
    _edit_weights(saved, lambda t: t.__setitem__("norm.weight", t["model.norm.weight"].clone()))
    _reject(saved, "'model.norm.weight' and 'norm.weight' are the same weight")


def test_domino_architecture_implies_the_domino_head(saved):
    """SpecForge's DominoDraftModel fills in projector_type 'domino' when the config leaves it out."""
    _edit_config(
        saved, lambda c: c.update(architectures=["DominoDraftModel"]) or c["dflash_config"].pop("projector_type")
    )
    assert DominoDrafter.from_pretrained(saved).config.head == "domino"


def test_from_pretrained_reads_the_config_once(qwen_target, make_drafter, tmp_path, monkeypatch):
    path = make_drafter(qwen_target).save_pretrained(tmp_path / "d")
    reads, read_text = [], Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self.name) or read_text(self, *a, **k))
    DominoDrafter.from_pretrained(path, target=qwen_target)
    assert reads.count("config.json") == 1
