import pytest
import torch

from inference.decoding.sampling import SamplingParams, greedy_ids, probabilities, sample, warp


def test_greedy_is_argmax_and_one_hot():
    logits = torch.tensor([[0.1, 2.0, 2.0, -1.0]])
    params = SamplingParams()
    assert sample(logits, params).item() == 1  # ties go to the lowest id
    assert torch.equal(probabilities(logits, params), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_greedy_ids_are_argmax_ties_and_nans_included(dtype):
    g = torch.Generator().manual_seed(0)
    for vocab in (2, 17, 4_099, 49_152):
        logits = torch.randint(-3, 3, (6, vocab), generator=g).to(dtype)  # many tied maxima per row
        logits[1] = 0.0  # every id ties
        logits[2, vocab // 2] = float("nan")  # argmax takes a NaN as the maximum
        assert torch.equal(greedy_ids(logits), logits.argmax(-1)), (dtype, vocab)


def test_top_k_and_top_p_cut_the_tail():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    p = probabilities(logits, SamplingParams(temperature=1.0, top_k=2))
    torch.testing.assert_close(p, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    p = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.8))  # 0.5 + 0.3 reaches 0.8
    torch.testing.assert_close(p, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    p = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.81))
    assert (p > 0).sum() == 3
    assert torch.isinf(warp(logits, SamplingParams(temperature=1.0, top_p=0.1))[1:]).all()


def test_temperature_scales_logits():
    logits = torch.tensor([1.0, 2.0])
    torch.testing.assert_close(warp(logits, SamplingParams(temperature=2.0)), torch.tensor([0.5, 1.0]))


def test_samples_follow_the_distribution():
    gen = torch.Generator().manual_seed(0)
    logits = torch.log(torch.tensor([0.7, 0.2, 0.1])).expand(20000, 3)
    draws = sample(logits, SamplingParams(temperature=1.0), gen)
    freq = torch.bincount(draws, minlength=3).float() / draws.numel()
    torch.testing.assert_close(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.015, rtol=0)


@pytest.mark.parametrize("kwargs", [dict(temperature=-1), dict(top_k=-2), dict(top_p=0.0), dict(top_p=1.5)])
def test_invalid_params(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)
