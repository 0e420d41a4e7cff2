"""Prepacked oneDNN linears (`inference.targets.prepacked_linear`): the switch, the replacement, the
numerics against plain bf16 `F.linear`, the tied lm_head, and lossless bf16 decoding on top of them."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from inference import load_target
from inference.decoding import build_decoder
from inference.eval.divergence import measure_divergence, measure_noise
from inference.targets.prepacked_linear import (
    PrepackedLinear,
    prepack_linears,
    prepack_unavailable_reason,
    resolve_prepack,
)

UNAVAILABLE = prepack_unavailable_reason("cpu", torch.bfloat16)
needs_prepack = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no prepacked bf16 linears: {UNAVAILABLE}")
# SmolLM2-135M's linear shapes (out, in): q/o, k/v, gate/up, down; the lm_head (49152 x 576) is cut to 4096
# rows here to keep the test small.
SHAPES = [(576, 576), (192, 576), (1536, 576), (576, 1536), (4096, 576)]
ROWS = (1, 2, 3, 4, 16, 17, 32)


def _linear(out_features: int, in_features: int, bias: bool = False, seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(in_features, out_features, bias=bias).to(torch.bfloat16).requires_grad_(False)


def _plain(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """Plain bf16 `F.linear` as one 2-D GEMM. (On a 3-D input with an unusual batch stride, e.g. a slice
    of a longer sequence, PyTorch's own `F.linear` may pick another kernel and round differently.)"""
    return F.linear(x.reshape(-1, x.shape[-1]), linear.weight, linear.bias).view(*x.shape[:-1], -1)


def _inputs(rows: int, in_features: int, seed: int = 1) -> list[torch.Tensor]:
    """2-D, 3-D and a non-contiguous 3-D slice (as the lm_head gets under `last_logits_only`)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, in_features, generator=g).to(torch.bfloat16)
    wide = torch.randn(1, rows + 3, in_features, generator=g).to(torch.bfloat16)
    return [x, x.unsqueeze(0), wide[:, 3:]]


def test_auto_prepacks_exactly_on_a_cpu_in_bf16():
    assert not resolve_prepack("auto", "cpu", torch.float32)
    assert not resolve_prepack("auto", "cuda", torch.bfloat16)
    assert not resolve_prepack(False, "cpu", torch.bfloat16)
    assert resolve_prepack("auto", "cpu", torch.bfloat16) == (UNAVAILABLE is None)
    with pytest.raises(ValueError, match="CPU feature"):
        resolve_prepack(True, "cuda", torch.bfloat16)
    with pytest.raises(ValueError, match="bf16 only"):
        resolve_prepack(True, "cpu", torch.float32)
    with pytest.raises(ValueError, match="auto, true or false"):
        resolve_prepack("yes", "cpu", torch.bfloat16)


def test_missing_onednn_falls_back_to_plain_linears(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert prepack_unavailable_reason("cpu", torch.bfloat16) == "this PyTorch build has no oneDNN (mkldnn)"
    assert not resolve_prepack("auto", "cpu", torch.bfloat16)
    target = load_target("tiny-llama", dtype="bfloat16", device="cpu")
    assert target.prepacked_linears == 0 and isinstance(target.lm_head, nn.Linear)
    with pytest.raises(ValueError, match="no oneDNN"):
        resolve_prepack(True, "cpu", torch.bfloat16)


def test_fp32_targets_keep_plain_linears():
    target = load_target("tiny-qwen3", dtype="float32", device="cpu")
    assert target.prepacked_linears == 0
    assert not any(isinstance(m, PrepackedLinear) for m in target.model.modules())


@needs_prepack
@pytest.mark.parametrize("spec", ["tiny-qwen3", "tiny-llama"])
def test_every_linear_is_prepacked_and_the_tied_lm_head_keeps_working(spec):
    plain = load_target(spec, dtype="bfloat16", device="cpu", prepack=False)
    target = load_target(spec, dtype="bfloat16", device="cpu")
    linears = [name for name, m in plain.model.named_modules() if isinstance(m, nn.Linear)]
    assert target.prepacked_linears == len(linears) > 0
    assert {name for name, m in target.model.named_modules() if isinstance(m, PrepackedLinear)} == set(linears)
    assert not any(isinstance(m, nn.Linear) for m in target.model.modules())
    # The lm_head keeps its plain weight, still the embedding's (tied); the others keep only the packed copy.
    assert target.lm_head.weight is target.embed_tokens.weight
    others = [m for m in target.model.modules() if isinstance(m, PrepackedLinear) and m is not target.lm_head]
    assert all(m.weight is None for m in others)
    ids = torch.randint(0, 500, (1, 7))
    torch.testing.assert_close(target.embed_tokens(ids), plain.embed_tokens(ids), rtol=0, atol=0)
    torch.testing.assert_close(target(ids).logits, plain(ids).logits)


@needs_prepack
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("bias", [False, True])
def test_prepacked_linear_matches_plain_linear(shape, bias):
    linear = _linear(*shape, bias=bias)
    packed = PrepackedLinear(linear)
    for rows in ROWS:
        for x in _inputs(rows, shape[1]):
            out = packed(x)
            assert out.shape == x.shape[:-1] + (shape[0],) and out.dtype == torch.bfloat16
            torch.testing.assert_close(out, F.linear(x, linear.weight, linear.bias))  # bf16 tolerance
            torch.testing.assert_close(out, _plain(x, linear))


@needs_prepack
@pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() != "AVX512", reason="bit-identity measured on AVX-512 (no AMX) only"
)
@pytest.mark.parametrize("hint", [2, 16, 64])
def test_prepacked_linear_is_bit_identical_with_a_hint_of_2_or_more(hint):
    for shape in SHAPES:
        linear = _linear(*shape)
        packed = PrepackedLinear(linear, batch_size_hint=hint)
        for rows in ROWS:
            for x in _inputs(rows, shape[1]):
                assert torch.equal(packed(x), _plain(x, linear)), (shape, rows, x.shape)


@needs_prepack
def test_prepacked_linear_is_inference_only():
    packed = PrepackedLinear(_linear(8, 16))
    x = torch.randn(2, 16, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(RuntimeError, match="inference-only"):
        packed(x)
    with torch.no_grad():
        packed(x)
    with pytest.raises(RuntimeError, match="CPU torch.bfloat16 inputs"):
        packed(torch.randn(2, 16))


@needs_prepack
def test_a_model_without_output_embeddings_keeps_only_packed_weights():
    model = nn.Sequential(_linear(16, 8), nn.ReLU(), _linear(4, 16))
    assert prepack_linears(model) == 2
    assert all(isinstance(model[i], PrepackedLinear) and model[i].weight is None for i in (0, 2))


@needs_prepack
@pytest.mark.parametrize("spec", ["tiny-qwen3", "tiny-llama"])
def test_bf16_decoding_on_prepacked_linears_is_lossless(spec, make_drafter):
    """Every method's output equals `ar`'s or first parts from it at a numerical tie (the divergence rule),
    with a full-vocabulary and a draft-vocabulary drafter (which reads `lm_head.weight`)."""
    target = load_target(spec, dtype="bfloat16", device="cpu")
    assert target.prepacked_linears > 0
    drafters = [make_drafter(target, block_size=5), make_drafter(target, block_size=5, draft_vocab_size=64)]
    drafters[1].vocab.set_ids(torch.arange(64))
    prompt = torch.randint(0, 256, (11,), generator=torch.Generator().manual_seed(3)).tolist()
    expected = build_decoder("ar", target).generate(prompt, 32).tokens
    floor = measure_noise(target, prompt, expected, 17)  # the widest window: a tree
    for drafter in drafters:
        drafter.to(torch.bfloat16)
        for method in ("dflash", "domino", "ddtree", "dominotree"):
            out = build_decoder(method, target, drafter).generate(prompt, 32)
            found = measure_divergence(target, prompt, expected, out.tokens)
            assert found is None or (found.gap is not None and found.gap <= floor), (method, found, floor)
