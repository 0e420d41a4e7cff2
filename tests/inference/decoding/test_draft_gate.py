"""`DraftGate`: drafting pauses while its rounds commit tokens slower than plain rounds, is tried again
after a doubling pause, and a cost-aware decoder whose drafts never pay decodes (losslessly) plainly."""

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.draft_gate import FIRST_PAUSE, PROBE_ROUNDS, DraftGate


def losing_probe(gate: DraftGate) -> None:
    """One probe of drafting rounds at 0.5 tok/s against 1 tok/s plain."""
    for _ in range(PROBE_ROUNDS):
        assert gate.drafting()
        gate.record(True, 1, 2.0, plain_estimate=1.0)


def test_a_losing_probe_pauses_drafting_and_the_pause_doubles():
    gate = DraftGate()
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
    gate = DraftGate(plain_rate=1.0)
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
