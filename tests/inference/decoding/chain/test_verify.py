import itertools

import pytest
import torch

from inference.decoding.chain.verify import ChainDraft, MatchVerifier, RejectionVerifier, make_verifier
from inference.decoding.sampling import SamplingParams, probabilities, sample_from

GREEDY = SamplingParams()
T1 = SamplingParams(temperature=1.0)


def _one_hot_logits(choices: list[int], vocab: int = 6) -> torch.Tensor:
    logits = torch.zeros(len(choices), vocab)
    logits[torch.arange(len(choices)), torch.tensor(choices)] = 5.0
    return logits


@pytest.mark.parametrize(
    ("drafts", "committed"),
    [([2, 4, 1], [2, 4, 1, 5]), ([2, 4, 0], [2, 4, 1]), ([3, 4, 1], [2]), ([], [2])],
)
def test_greedy_match_keeps_the_agreeing_prefix_then_the_target_choice(drafts, committed):
    target_logits = _one_hot_logits([2, 4, 1, 5][: len(drafts) + 1])
    draft = ChainDraft(torch.tensor(drafts, dtype=torch.long))
    assert MatchVerifier(GREEDY)(draft, target_logits) == committed


def test_rejection_keeps_drafts_drawn_from_the_target_distribution():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 6, generator=gen)
    p = probabilities(logits, T1)
    for _ in range(50):
        tokens = sample_from(p[:3], gen)
        committed = RejectionVerifier(T1)(ChainDraft(tokens, p[:3]), logits, gen)
        assert committed[:3] == tokens.tolist() and len(committed) == 4  # p / q = 1: always accepted


def test_rejection_never_keeps_a_token_the_target_rules_out():
    gen = torch.Generator().manual_seed(0)
    params = SamplingParams(temperature=1.0, top_k=2)
    target_logits = torch.tensor([[3.0, 2.0, 0.0, -1.0]] * 2)
    q = torch.tensor([[0.0, 0.0, 1.0, 0.0]])  # a draft sure of token 2, outside the target's top-2
    for _ in range(20):
        committed = RejectionVerifier(params)(ChainDraft(torch.tensor([2]), q), target_logits, gen)
        assert len(committed) == 1 and committed[0] in (0, 1)


def test_rule_names():
    assert isinstance(make_verifier("rejection", T1), RejectionVerifier)
    assert isinstance(make_verifier("rejection", GREEDY), MatchVerifier)  # one-hot p and q: the greedy match
    with pytest.raises(ValueError, match="match, rejection"):
        make_verifier("typical", T1)


# A toy language: the target and the drafter are Markov chains over 3 tokens, similar but not equal.
VOCAB, NUM_DRAFT = 3, 2
_GEN = torch.Generator().manual_seed(1)
TARGET_LOGITS = 1.5 * torch.randn(VOCAB, VOCAB, generator=_GEN)
DRAFT_LOGITS = TARGET_LOGITS + 1.5 * torch.randn(VOCAB, VOCAB, generator=_GEN)


def _decode_three(verifier, sampled_drafts: bool, gen: torch.Generator) -> tuple[tuple[int, ...], list[int]]:
    """Three tokens after token 0 by speculative rounds on the toy chains; also the tokens per round."""
    out, rounds, root = [], [], 0
    while len(out) < 3:
        tokens, probs, prev = [], [], root
        for _ in range(NUM_DRAFT):
            q = probabilities(DRAFT_LOGITS[prev], T1)
            prev = int(sample_from(q, gen)) if sampled_drafts else int(DRAFT_LOGITS[prev].argmax())
            tokens.append(prev)
            probs.append(q)
        draft = ChainDraft(torch.tensor(tokens), torch.stack(probs))
        committed = verifier(draft, TARGET_LOGITS[[root, *tokens]], gen)
        out += committed
        rounds.append(len(committed))
        root = committed[-1]
    return tuple(out[:3]), rounds


@pytest.mark.parametrize(("rule", "sampled_drafts"), [("match", False), ("match", True), ("rejection", True)])
def test_verified_tokens_follow_the_target_distribution(rule, sampled_drafts, chi_square_pvalue):
    p = TARGET_LOGITS.softmax(-1)
    exact = {
        seq: float(p[0, seq[0]] * p[seq[0], seq[1]] * p[seq[1], seq[2]])
        for seq in itertools.product(range(VOCAB), repeat=3)
    }
    gen = torch.Generator().manual_seed(2)
    verifier = make_verifier(rule, T1)
    counts, lengths = {}, []
    for _ in range(3000):
        seq, rounds = _decode_three(verifier, sampled_drafts, gen)
        counts[seq] = counts.get(seq, 0) + 1
        lengths += rounds
    assert chi_square_pvalue(counts, exact) > 1e-3
    assert 1 in lengths and NUM_DRAFT + 1 in lengths  # rejections and fully accepted rounds both occurred


def test_rejection_accepts_more_than_matching_sampled_drafts():
    gen = torch.Generator().manual_seed(3)
    mean = {}
    for rule in ("match", "rejection"):
        lengths = [n for _ in range(600) for n in _decode_three(make_verifier(rule, T1), True, gen)[1]]
        mean[rule] = sum(lengths) / len(lengths)
    assert mean["rejection"] > mean["match"] + 0.1
