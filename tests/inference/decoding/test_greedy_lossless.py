"""Greedy (T = 0) speculative decoding emits exactly the tokens of the `ar` baseline (fp32)."""

import pytest
import torch

from inference.decoding import ARDecoder, DecodeOptions, PromptTooLongError, build_decoder


def _prompt(length: int, seed: int) -> list[int]:
    return torch.randint(0, 256, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


def _assert_methods_equal_ar(target, drafter, prompt, max_new, methods=("dflash", "domino"), **options):
    options = DecodeOptions(**options)
    expected = build_decoder("ar", target, options=options).generate(prompt, max_new)
    for method in methods:
        out = build_decoder(method, target, drafter, options).generate(prompt, max_new)
        assert out.tokens == expected.tokens, method
        assert out.finish_reason == expected.finish_reason
        stats = out.stats
        assert stats.output_tokens == len(out.tokens) == 1 + sum(stats.accept_lengths)
        if stats.rounds:
            assert 1 <= stats.tau <= drafter.config.num_draft_tokens + 1
    return expected


@pytest.mark.parametrize("block_size", range(2, 17))
def test_trained_drafter_is_lossless_at_every_block_size(any_tiny_target, block_size, trained_drafter, with_block_size):
    target = any_tiny_target
    trained, seqs = trained_drafter(target)
    drafter = with_block_size(trained, target, block_size)
    _assert_methods_equal_ar(target, drafter, seqs[block_size % 8, : 3 + 2 * block_size], 40)


@pytest.mark.parametrize(
    "overrides",
    [dict(block_size=2), dict(block_size=16), dict(head=None, block_size=5), dict(shift_label=True)]
    + [dict(pure_draft_prefix_len=0), dict(pure_draft_prefix_len=4, block_size=6)],
)
def test_random_drafters_are_lossless(any_tiny_target, overrides, make_drafter):
    target = any_tiny_target
    drafter = make_drafter(target, seed=sum(map(hash, map(str, overrides.items()))) % 1000, **overrides)
    methods = ("dflash",) if drafter.head is None else ("dflash", "domino")
    for length in (1, 19):
        _assert_methods_equal_ar(target, drafter, _prompt(length, length), 24, methods)


def test_stop_tokens_end_the_generation_where_ar_stops(any_tiny_target, trained_drafter):
    target = any_tiny_target
    drafter, seqs = trained_drafter(target)
    for row in range(len(seqs)):  # a continuation whose tokens change late, inside a round
        prompt = seqs[row, :9]
        free = ARDecoder(target, DecodeOptions(stop_token_ids=[])).generate(prompt, 40).tokens
        firsts = {t: free.index(t) for t in dict.fromkeys(free)}  # each token's first position
        if max(firsts.values()) > 8:
            break
    else:
        pytest.fail("no continuation changes token after its first round")
    for stop, position in firsts.items():
        out = _assert_methods_equal_ar(target, drafter, prompt, 40, stop_token_ids=[stop])
        assert out.tokens == free[: position + 1] and out.finish_reason == "stop"


@pytest.mark.parametrize("max_new", [1, 2, 3, 7, 8, 9, 15, 16, 17])
def test_max_new_tokens_is_honoured_exactly(qwen_target, max_new, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)  # block 8: 7 drafts + 1 bonus per round
    out = _assert_methods_equal_ar(qwen_target, drafter, seqs[2, :9], max_new, stop_token_ids=[])
    assert len(out.tokens) == max_new and out.finish_reason == "length"


def test_the_context_limit_caps_the_output_and_refuses_full_prompts(qwen_target, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)
    prompt = seqs[0, :20]
    out = _assert_methods_equal_ar(qwen_target, drafter, prompt, 40, stop_token_ids=[], max_context=26)
    assert len(out.tokens) == 6
    for method in ("ar", "domino"):
        with pytest.raises(PromptTooLongError, match="20 tokens"):
            build_decoder(method, qwen_target, drafter, DecodeOptions(max_context=20)).generate(prompt, 5)
