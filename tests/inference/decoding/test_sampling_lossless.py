"""At T > 0 every chain method samples from the target's own distribution, and the check can tell.

The rules themselves are checked exactly (every outcome enumerated) in chain/test_verify.py and
tree/test_tree_verify.py; this is the end-to-end check on the tiny target (drafter, caches, rounds):
1200 generations of 3 tokens, chi-square at level 1e-3 against the exact law of the first three tokens
(`SampledCheck`). Simulated with that statistic on that law (multinomial draws, 2,000 seeds each), a
sampler biased by total variation 0.02 at every token fails the check in 100.0 % of seeds when it leans
toward the argmax (the argmax taken now and then) and in 99.2 % when it leans away from it; the exact
sampler fails in 0.1 %. `test_the_sampled_check_catches_a_planted_bias` reruns that simulation (1,000
seeds), so a change of setting that loses the power fails. Each case takes about 20 s of one CPU core.
"""

import pytest
import torch

from inference.decoding import DecodeOptions, build_decoder

CASES = [
    ("domino", "match"),
    ("domino", "rejection"),
    pytest.param("dflash", "rejection", marks=pytest.mark.slow),
    pytest.param("dflash", "match", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("method", "verify"), CASES)
def test_sampled_tokens_follow_the_target_distribution(
    qwen_target, method, verify, sampled_check, trained_drafter, with_block_size
):
    trained, seqs = trained_drafter(qwen_target)
    drafter = with_block_size(trained, qwen_target, 3)  # 2 drafts: tokens 2 and 3 come from verify rounds
    options = DecodeOptions(sampled_check.params, verify, stop_token_ids=[])
    sampled_check.check(build_decoder(method, qwen_target, drafter, options), qwen_target, seqs)


def test_the_sampled_check_catches_a_planted_bias(
    qwen_target, trained_drafter, sampled_check, exact_joint, chi_square_pvalue
):
    """The power the module docstring states, on 1,000 seeds: counts drawn from the law of a sampler biased by
    TV 0.02 per token (either way) fail the check in >= 95 % of seeds; counts from the exact law in <= 1 %."""
    _, seqs = trained_drafter(qwen_target)
    prompt, params = sampled_check.prompt(seqs), sampled_check.params
    exact = exact_joint(qwen_target, prompt, params)
    gen = torch.Generator().manual_seed(0)
    failed = {}
    for bias in (0.0, 0.02, -0.02):
        law = exact_joint(qwen_target, prompt, params, bias=bias)
        outcomes = list(law)
        weights = torch.tensor([law[k] for k in outcomes], dtype=torch.float64)
        fails = 0
        for _ in range(1000):
            draws = torch.multinomial(weights, sampled_check.runs, replacement=True, generator=gen)
            counts = dict(zip(outcomes, draws.bincount(minlength=len(outcomes)).tolist(), strict=True))
            fails += chi_square_pvalue({k: c for k, c in counts.items() if c}, exact) <= sampled_check.alpha
        failed[bias] = fails / 1000
    assert failed[0.02] >= 0.95 and failed[-0.02] >= 0.95 and failed[0.0] <= 0.01, failed
