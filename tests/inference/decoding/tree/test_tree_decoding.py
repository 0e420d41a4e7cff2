"""Tree decoding is lossless: token-identical to `ar` at T = 0 (fp32), the target's distribution at T > 0."""

import pytest
import torch

from inference.decoding import DecodeOptions, TreeOptions, build_decoder

TREES = ("ddtree", "dominotree")


def _equal_to_ar(target, drafter, prompt, max_new, tree, **options):
    options = DecodeOptions(**options)
    expected = build_decoder("ar", target, options=options).generate(prompt, max_new)
    for method in TREES:
        out = build_decoder(method, target, drafter, options, TreeOptions(**tree)).generate(prompt, max_new)
        assert out.tokens == expected.tokens, (method, tree)
        assert out.finish_reason == expected.finish_reason
        if out.stats.rounds:
            assert 1 <= out.stats.tau <= drafter.config.num_draft_tokens + 1
    return expected


@pytest.mark.parametrize("budget", [1, 3, 16, 48])
def test_trained_drafter_trees_are_lossless(any_tiny_target, budget, trained_drafter):
    drafter, seqs = trained_drafter(any_tiny_target)
    for row in (0, 3):
        _equal_to_ar(any_tiny_target, drafter, seqs[row, :11], 30, dict(budget=budget, top_m=16, node_topk=4))


@pytest.mark.parametrize(
    "overrides, tree",
    [
        (dict(block_size=2), dict(budget=4)),
        (dict(block_size=16), dict(budget=16, top_m=0)),
        (dict(pure_draft_prefix_len=0), dict(budget=8, node_topk=2)),
        (dict(shift_label=True), dict(budget=8)),
    ],
)
def test_random_drafter_trees_are_lossless(qwen_target, overrides, tree, make_drafter):
    drafter = make_drafter(qwen_target, **overrides)
    prompt = torch.randint(0, 256, (13,), generator=torch.Generator().manual_seed(1)).tolist()
    _equal_to_ar(qwen_target, drafter, prompt, 20, tree)


def test_stop_tokens_and_exact_lengths(qwen_target, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)
    for max_new in (1, 2, 7, 8, 9):
        out = _equal_to_ar(qwen_target, drafter, seqs[1, :9], max_new, dict(budget=8), stop_token_ids=[])
        assert len(out.tokens) == max_new
    free = build_decoder("ar", qwen_target, options=DecodeOptions(stop_token_ids=[])).generate(seqs[1, :9], 30).tokens
    stop = free[12]
    out = _equal_to_ar(qwen_target, drafter, seqs[1, :9], 30, dict(budget=8), stop_token_ids=[stop])
    assert out.tokens == free[: free.index(stop) + 1]


def test_trees_accept_more_than_chains_on_a_trained_drafter(qwen_target, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)
    taus = {}
    for method in ("domino", "dominotree", "ddtree"):
        decoder = build_decoder(method, qwen_target, drafter, DecodeOptions(stop_token_ids=[]), TreeOptions(budget=32))
        rounds = [decoder.generate(seqs[r, :9], 40).stats for r in range(4)]
        taus[method] = sum(sum(s.accept_lengths) for s in rounds) / sum(s.rounds for s in rounds)
    assert taus["dominotree"] >= taus["domino"]


@pytest.mark.parametrize(
    "method, verify",
    [
        ("dominotree", "match"),
        ("dominotree", "residual"),
        pytest.param("ddtree", "match", marks=pytest.mark.slow),
        pytest.param("ddtree", "residual", marks=pytest.mark.slow),
    ],
)
def test_sampled_tree_tokens_follow_the_target_distribution(
    qwen_target, method, verify, sampled_check, trained_drafter, with_block_size
):
    """The powered end-to-end check of tests/inference/decoding/test_sampling_lossless.py (its docstring gives
    the power); the rules themselves are checked exactly in test_tree_verify.py."""
    trained, seqs = trained_drafter(qwen_target)
    drafter = with_block_size(trained, qwen_target, 3)
    options = DecodeOptions(sampled_check.params, verify, stop_token_ids=[])
    decoder = build_decoder(method, qwen_target, drafter, options, TreeOptions(budget=4))
    sampled_check.check(decoder, qwen_target, seqs)


def test_bad_tree_options(qwen_target, make_drafter):
    with pytest.raises(ValueError, match="needs a drafter with a Domino head"):
        build_decoder("dominotree", qwen_target, make_drafter(qwen_target, head=None))
    with pytest.raises(ValueError, match="unknown verify rule 'rejection' for ddtree"):
        build_decoder("ddtree", qwen_target, make_drafter(qwen_target), DecodeOptions(verify="rejection"))
    with pytest.raises(ValueError, match="budget must be"):
        TreeOptions(budget=0)
    with pytest.raises(ValueError, match="cuda_graph=on needs a CUDA device"):
        build_decoder("dominotree", qwen_target, make_drafter(qwen_target), DecodeOptions(cuda_graph="on"))


def test_a_plain_round_runs_the_root_as_ar_runs_its_step(qwen_target, trained_drafter, monkeypatch):
    """An empty tree (the cost model chose no draft) verifies the root with no mask and no positions, the
    call `ar` makes: the same kernels, so in bf16 it rounds exactly as `ar` does."""
    drafter, seqs = trained_drafter(qwen_target)
    decoder = build_decoder("dominotree", qwen_target, drafter, tree=TreeOptions(budget=4))
    monkeypatch.setattr(decoder, "draft", decoder.no_draft)
    calls = []

    class Spy:  # the target, recording how each forward is called
        def __getattr__(self, name):
            return getattr(qwen_target, name)

        def __call__(self, ids, cache=None, position_ids=None, attention_mask=None, **kw):
            calls.append((ids.shape[1], position_ids, attention_mask))
            return qwen_target(ids, cache=cache, position_ids=position_ids, attention_mask=attention_mask, **kw)

    decoder.target = Spy()
    out = decoder.generate(seqs[0, :9], 12)
    rounds = calls[1:]  # after the prefill
    assert len(rounds) == 11 and all(c == (1, None, None) for c in rounds)
    assert out.tokens == build_decoder("ar", qwen_target).generate(seqs[0, :9], 12).tokens
