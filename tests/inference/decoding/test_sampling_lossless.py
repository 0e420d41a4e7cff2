"""At T > 0 every method samples from the target's own distribution (chi-square against the exact joint
law of the first three tokens, computed by enumerating the target's top-k support)."""

import pytest

from inference.decoding import DecodeOptions, build_decoder
from inference.decoding.sampling import SamplingParams

CASES = [
    ("domino", "match", SamplingParams(temperature=1.0, top_k=2)),
    ("domino", "rejection", SamplingParams(temperature=1.0, top_k=2)),
    pytest.param("dflash", "rejection", SamplingParams(temperature=0.5, top_k=4, top_p=0.7), marks=pytest.mark.slow),
    pytest.param("dflash", "match", SamplingParams(temperature=1.3, top_k=3), marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("method", "verify", "params"), CASES)
def test_sampled_tokens_follow_the_target_distribution(
    qwen_target, method, verify, params, trained_drafter, with_block_size, chi_square_pvalue, exact_joint, sample_counts
):
    trained, seqs = trained_drafter(qwen_target)
    drafter = with_block_size(trained, qwen_target, 3)  # 2 drafts: tokens 2 and 3 come from verify rounds
    prompt = seqs[0, :9]
    decoder = build_decoder(method, qwen_target, drafter, DecodeOptions(params, verify, stop_token_ids=[]))
    counts, lengths = sample_counts(decoder, prompt, 300)
    assert chi_square_pvalue(counts, exact_joint(qwen_target, prompt, params)) > 1e-3
    assert 1 in lengths and max(lengths) >= 2  # rejected and accepted drafts both occurred
