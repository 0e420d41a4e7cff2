"""At T > 0 every method samples from the target's own distribution (chi-square against the exact joint
law of the first three tokens, computed by enumerating the target's top-k support)."""

import pytest
import torch

from inference.decoding import build_decoder
from inference.sampling import SamplingParams, probabilities


def _exact_joint(target, prompt: torch.Tensor, params: SamplingParams, depth: int = 3) -> dict[tuple, float]:
    """P(t_1..t_depth) under plain sampling from the target, by enumeration of the (small) support."""
    joint = {(): 1.0}
    for _ in range(depth):
        prefixes = list(joint)
        batch = torch.stack([torch.cat([prompt, torch.tensor(p, dtype=torch.long)]) for p in prefixes])
        with torch.no_grad():
            probs = probabilities(target(batch).logits[:, -1], params)
        joint = {
            (*p, t): joint[p] * float(probs[i, t])
            for i, p in enumerate(prefixes)
            for t in probs[i].nonzero()[:, 0].tolist()
        }
    return joint


def _sample_counts(decoder, prompt, n: int, seed: int = 0) -> tuple[dict[tuple, int], list[int]]:
    gen = torch.Generator().manual_seed(seed)
    counts, lengths = {}, []
    for _ in range(n):
        out = decoder.generate(prompt, 3, gen)
        counts[tuple(out.tokens)] = counts.get(tuple(out.tokens), 0) + 1
        lengths += out.stats.accept_lengths
    return counts, lengths


CASES = [
    ("domino", "match", SamplingParams(temperature=1.0, top_k=2)),
    ("domino", "rejection", SamplingParams(temperature=1.0, top_k=2)),
    pytest.param("dflash", "rejection", SamplingParams(temperature=0.5, top_k=4, top_p=0.7), marks=pytest.mark.slow),
    pytest.param("dflash", "match", SamplingParams(temperature=1.3, top_k=3), marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("method", "verify", "params"), CASES)
def test_sampled_tokens_follow_the_target_distribution(
    qwen_target, method, verify, params, trained_drafter, with_block_size, chi_square_pvalue
):
    trained, seqs = trained_drafter(qwen_target)
    drafter = with_block_size(trained, qwen_target, 3)  # 2 drafts: tokens 2 and 3 come from verify rounds
    prompt = seqs[0, :9]
    decoder = build_decoder(method, qwen_target, drafter, params, verify, stop_token_ids=[])
    counts, lengths = _sample_counts(decoder, prompt, 300)
    assert chi_square_pvalue(counts, _exact_joint(qwen_target, prompt, params)) > 1e-3
    assert 1 in lengths and max(lengths) >= 2  # rejected and accepted drafts both occurred
