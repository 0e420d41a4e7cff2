"""Every engine path decodes exactly what HF's eager forward decodes on the fp32 tiny targets: `ar`, the
chains and the trees on the lean engine, with plain, oneDNN-prepacked and bf16-stored kernels, emit the
eager `ar` tokens (the bf16-weights target is compared with the same weights rounded to bf16 on HF)."""

import pytest
import torch

from inference import DominoDrafter
from inference.decoding import DecodeOptions, build_decoder
from inference.kernels.choice import PrecisionChoice
from inference.kernels.linear import kernel_unavailable_reason
from inference.targets.engine import install_engine
from inference.targets.tiny import tiny_target

METHODS = ("ar", "dflash", "domino", "ddtree", "dominotree")
PATHS = {
    "lean-plain": dict(engine="lean", prepack=False),
    "lean-onednn": dict(engine="lean", prepack=True),
    "hf-onednn": dict(engine="hf", prepack=True),
}


def _rounded(target):
    with torch.no_grad():
        for p in target.model.parameters():
            p.copy_(p.to(torch.bfloat16))
    return target


def _engine_target(arch: str, path: str):
    if path == "lean-bf16w":
        target = _rounded(tiny_target(arch))
        target.precision = PrecisionChoice("bf16-weights", "explicit")  # as load_target(dtype="bf16-weights")
        install_engine(target, engine="lean", prepack="auto")
        return target
    if "onednn" in path and kernel_unavailable_reason("onednn", "float32") is not None:
        pytest.skip("no oneDNN fp32 linears here")
    return install_engine(tiny_target(arch), **PATHS[path])


@pytest.mark.parametrize("path", [*PATHS, "lean-bf16w"])
def test_every_method_on_every_engine_path_emits_the_eager_ar_tokens(any_tiny_target, trained_drafter, path):
    arch = any_tiny_target.name.removeprefix("tiny-")
    if path == "lean-bf16w":
        if kernel_unavailable_reason("bf16w", "bf16-weights") is not None:
            pytest.skip("the bf16w kernel cannot run here")
        eager = _rounded(tiny_target(arch))
    else:
        eager = any_tiny_target
    trained, seqs = trained_drafter(eager)
    drafter = DominoDrafter(trained.config)  # a copy: binding to a measured target converts its linears
    drafter.load_state_dict(trained.state_dict())
    options = DecodeOptions(stop_token_ids=[])
    prompts = [seqs[row, : 5 + 3 * row] for row in range(3)]
    expected = [build_decoder("ar", eager, options=options).generate(p, 30).tokens for p in prompts]
    target = _engine_target(arch, path)
    drafter.bind_target(target.embed_tokens, target.lm_head)
    for method in METHODS:
        decoder = build_decoder(method, target, None if method == "ar" else drafter, options)
        got = [decoder.generate(p, 30).tokens for p in prompts]
        assert got == expected, (path, method)
