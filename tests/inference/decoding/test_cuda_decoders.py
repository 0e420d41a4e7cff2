"""The decoders' CUDA-only branches: graph capture and replay, graphed vs eager decoding, bf16 targets."""

import pytest
import torch

from inference import load_target, tiny_target
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.kernels.cuda_graph import StaticStep

pytestmark = pytest.mark.gpu

PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8], [40, 41, 42, 43, 44]]


def test_static_step_captures_once_and_replays_new_inputs():
    x = torch.zeros(4, device="cuda")
    y = torch.zeros(4, device="cuda")
    calls = []

    def fn():
        calls.append(1)
        y.copy_(x * 2 + 1)

    step = StaticStep(fn, graph=True, warmup=2)
    for value in (1.0, 5.0, -3.0):
        x.fill_(value)
        step()
        torch.cuda.synchronize()
        assert torch.equal(y, torch.full_like(y, 2 * value + 1))
    assert len(calls) == 3  # two warm-up calls and the capture; replays run no Python
    assert step.graph is not None


def _decode(target, drafter, method, cuda_graph):
    decoder = build_decoder(method, target, drafter, DecodeOptions(cuda_graph=cuda_graph), TreeOptions(budget=8))
    return decoder, [decoder.generate(p, 24).tokens for p in PROMPTS]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@torch.inference_mode()
def test_graphed_decoders_equal_eager_and_ar_on_cuda(make_drafter, dtype):
    target = tiny_target("qwen3", dtype=dtype)
    target.model.to("cuda")
    drafter = make_drafter(target, block_size=8).to("cuda", dtype).eval()
    _, ar = _decode(target, None, "ar", "off")
    for method in ("domino", "dominotree"):
        graphed, tokens = _decode(target, drafter, method, "on")
        if method == "domino":
            assert graphed.rollout is not None and graphed.rollout.step.graph is not None
        else:
            assert graphed.expander.expand_step.graph is not None
        _, eager = _decode(target, drafter, method, "off")
        assert tokens == eager, method  # the graphs replay the eager arithmetic exactly, bf16 included
        if dtype == torch.float32:  # in bf16 a k-token verify forward may round unlike a 1-token AR step
            assert tokens == ar, method


def test_targets_load_in_bf16_on_cuda_by_default():
    target = load_target("tiny-qwen3", device="cuda")
    assert target.dtype == torch.bfloat16 and target.device.type == "cuda"
