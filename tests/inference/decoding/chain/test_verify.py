import pytest
import torch

from inference.decoding import sampling
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


# A toy language: the target and the drafter are Markov chains over 3 tokens, similar but not equal (float64,
# so that the rules compute in float64 and the laws below agree to rounding).
VOCAB, NUM_DRAFT = 3, 2
_GEN = torch.Generator().manual_seed(1)
TARGET_LOGITS = 1.5 * torch.randn(VOCAB, VOCAB, generator=_GEN, dtype=torch.float64)
DRAFT_LOGITS = TARGET_LOGITS + 1.5 * torch.randn(VOCAB, VOCAB, generator=_GEN, dtype=torch.float64)
PARAMS = {
    "T=1": T1,
    "T=0.7 top-2": SamplingParams(temperature=0.7, top_k=2),  # drafts outside the target's support occur
    "T=1.3 top-p 0.8": SamplingParams(temperature=1.3, top_p=0.8),
    "greedy": GREEDY,
}


def _round(verifier, params: SamplingParams, root: int, sampled_drafts: bool, gen: torch.Generator) -> tuple:
    """The tokens one speculative round on the toy chains commits after `root`."""
    tokens, probs, prev = [], [], root
    for _ in range(NUM_DRAFT):
        q = probabilities(DRAFT_LOGITS[prev], params)
        prev = int(sampling.sample_from(q, gen)) if sampled_drafts else int(DRAFT_LOGITS[prev].argmax())
        tokens.append(prev)
        probs.append(q)
    draft = ChainDraft(torch.tensor(tokens), torch.stack(probs))
    return tuple(verifier(draft, TARGET_LOGITS[[root, *tokens]], gen))


@pytest.mark.parametrize("params", PARAMS.values(), ids=PARAMS.keys())
@pytest.mark.parametrize(("rule", "sampled_drafts"), [("match", False), ("match", True), ("rejection", True)])
def test_a_round_commits_the_target_distribution_exactly(
    rule, sampled_drafts, params, exact_law, assert_round_lossless
):
    """Every draft and every random outcome of the rule, enumerated: the committed tokens, continued by plain
    sampling, have exactly the target's law (to rounding)."""
    verifier = make_verifier(rule, params)
    p = probabilities(TARGET_LOGITS, params).double()
    for root in range(VOCAB):
        law = exact_law(lambda gen, root=root: _round(verifier, params, root, sampled_drafts, gen))
        assert {len(seq) for seq in law} <= set(range(1, NUM_DRAFT + 2))
        assert_round_lossless(law, root, p, NUM_DRAFT + 1)


def test_rejection_accepts_more_than_matching_sampled_drafts(exact_law):
    mean = {}
    for rule in ("match", "rejection"):
        law = exact_law(lambda gen, rule=rule: _round(make_verifier(rule, T1), T1, 0, True, gen))
        mean[rule] = sum(len(seq) * w for seq, w in law.items())
    assert mean["rejection"] > mean["match"] + 0.1
