"""`DraftGate`: drafting pauses while its rounds commit tokens slower than plain rounds, is tried again
after a doubling pause, and a cost-aware decoder whose drafts never pay decodes (losslessly) plainly."""

from dataclasses import replace

import pytest

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.draft_gate import FIRST_PAUSE, PROBE_ROUNDS, PROBE_SHARE, DraftGate


def losing_probe(gate: DraftGate) -> None:
    """One probe of drafting rounds at 0.5 tok/s against 1 tok/s plain."""
    for _ in range(PROBE_ROUNDS):
        assert gate.drafting()
        gate.record(True, 1, 2.0, plain_estimate=1.0)


def test_a_losing_probe_pauses_drafting_and_the_pause_doubles():
    gate = DraftGate(probe_share=None)
    assert gate.reopening()
    gate.drafting()
    gate.record(True, 1, 2.0, plain_estimate=1.0)
    assert gate.pause == 0 and not gate.reopening()  # a probe is judged on all its rounds
    gate.drafting()
    gate.record(True, 1, 2.0, plain_estimate=1.0)
    assert [gate.drafting() for _ in range(FIRST_PAUSE + 1)] == [False] * FIRST_PAUSE + [True]
    assert gate.reopening()
    gate.record(True, 1, 2.0, plain_estimate=1.0)
    gate.drafting()
    gate.record(True, 1, 2.0, plain_estimate=1.0)
    assert gate.pause == 2 * FIRST_PAUSE and gate.plain_rounds == FIRST_PAUSE


def test_a_winning_retry_reopens_at_once_however_bad_the_rate_before_the_pause():
    gate = DraftGate(plain_rate=1.0, probe_share=None)
    for _ in range(3):  # three losing probes: the pause reaches 4 * FIRST_PAUSE
        losing_probe(gate)
        while gate.pause:
            gate.drafting()
    assert gate.next_pause == 8 * FIRST_PAUSE
    for _ in range(PROBE_ROUNDS):  # a retry at 1.2x plain: the rate before the pause (0.5) does not weigh
        assert gate.drafting()
        gate.record(True, 1.2, 1.0, plain_estimate=1.0)
    assert gate.draft_rate == 1.2 and gate.pause == 0 and gate.next_pause == FIRST_PAUSE
    gate.record(True, 0.8, 1.0, plain_estimate=1.0)  # while open, one slow round only moves the mean
    assert gate.pause == 0 and gate.draft_rate == 0.75 * 1.2 + 0.25 * 0.8


def test_a_losing_retry_pauses_until_plain_rounds_ran_its_lost_seconds_over_the_probe_share():
    """A probe of 2 rounds x (1 token in 2 s) against 1 token / s plain lost 2 s; the pause lasts until plain
    rounds ran 2 / PROBE_SHARE s, however many rounds that takes, so retries cost at most that share."""
    gate = DraftGate(plain_rate=1.0)
    losing_probe(gate)
    owed = 2.0 / PROBE_SHARE
    assert gate.owed == pytest.approx(owed) and gate.pause == FIRST_PAUSE
    ran = 0.0
    while not gate.drafting():
        gate.record(False, 1, 1.0, plain_estimate=1.0)
        ran += 1.0
    assert ran == pytest.approx(owed) and ran > FIRST_PAUSE
    gate.record(True, 1.9, 2.0, plain_estimate=1.0)  # a retry that barely loses: its pause is the round count
    gate.drafting()
    gate.record(True, 1.9, 2.0, plain_estimate=1.0)
    assert gate.owed == pytest.approx(0.2 / PROBE_SHARE) and gate.pause == 2 * FIRST_PAUSE


def test_a_gate_turned_off_drafts_every_round_however_drafting_fares():
    gate = DraftGate(enabled=False, plain_rate=1.0)
    losing_probe(gate)
    assert all(gate.drafting() for _ in range(3 * FIRST_PAUSE))


def test_plain_rounds_update_the_plain_rate_only():
    gate = DraftGate()
    gate.record(False, 1, 0.5, plain_estimate=1.0)
    assert gate.plain_rate == 2.0 and gate.draft_rate is None and gate.pause == 0


def test_a_cost_aware_tree_whose_drafts_never_pay_decodes_plainly_and_stays_lossless(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, seed=5)  # random: its drafts are (almost) never accepted
    prompt = list(range(40, 52))
    options = DecodeOptions(stop_token_ids=[])
    expected = build_decoder("ar", qwen_target, options=options).generate(prompt, 60).tokens
    decoder = build_decoder("dominotree", qwen_target, drafter, options, TreeOptions(budget="auto", max_budget=8))
    out = decoder.generate(prompt, 60)
    assert out.tokens == expected
    assert out.stats.plain_rounds > out.stats.rounds // 2
    ungated = replace(options, draft_gate=False)
    decoder = build_decoder("dominotree", qwen_target, drafter, ungated, TreeOptions(budget="auto", max_budget=8))
    out = decoder.generate(prompt, 60)
    assert out.tokens == expected and out.stats.plain_rounds == 0


def test_a_drafting_round_is_judged_by_its_expected_tokens_scaled_by_what_rounds_committed():
    gate = DraftGate(plain_rate=1.0)
    assert gate.calibration() == 1.0
    gate.record(True, 1, 1.0, plain_estimate=1.0, expected=2.0)  # unlucky: 1 token where 2 were expected
    gate.record(True, 1, 1.0, plain_estimate=1.0, expected=2.0)
    # the ratio of committed to expected tokens (0.5 over 2 rounds) shrunk toward 1 by 16 rounds' worth
    ratio = (2 + 16 * 2) / (4 + 16 * 2)
    assert gate.calibration() == pytest.approx(ratio)
    assert gate.pause == 0 and gate.draft_rate > 1.0  # judged by the expectation: drafting pays
    for _ in range(1000):  # an acceptance model that keeps expecting twice what rounds commit
        gate.record(True, 1, 1.0, plain_estimate=1.0, expected=2.0)
    assert gate.calibration() == pytest.approx(0.5, abs=0.02)
    assert gate.draft_rate == pytest.approx(1.0, abs=0.04)  # the bias is scaled away


def test_a_plain_round_s_expectation_is_not_read():
    gate = DraftGate()
    gate.record(False, 1, 0.5, plain_estimate=1.0, expected=5.0)
    assert gate.plain_rate == 2.0 and gate.expected_rounds == 0
