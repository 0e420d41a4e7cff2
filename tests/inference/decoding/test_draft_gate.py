"""`DraftGate`: drafting pauses while its rounds commit tokens slower than plain rounds, is tried again
after a doubling pause, and a cost-aware decoder whose drafts never pay decodes (losslessly) plainly."""

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.draft_gate import FIRST_PAUSE, DraftGate


def test_a_losing_draft_pauses_drafting_and_the_pause_doubles():
    gate = DraftGate()
    assert gate.drafting()
    gate.record(True, 1, 2.0, plain_estimate=1.0)  # 0.5 tok/s against 1 tok/s plain
    assert [gate.drafting() for _ in range(FIRST_PAUSE + 1)] == [False] * FIRST_PAUSE + [True]
    gate.record(True, 1, 2.0, plain_estimate=1.0)
    assert gate.pause == 2 * FIRST_PAUSE and gate.plain_rounds == FIRST_PAUSE
    gate.pause = 0
    gate.record(True, 40, 1.0, plain_estimate=1.0)  # a winning round resets the next pause
    assert gate.pause == 0 and gate.next_pause == FIRST_PAUSE


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
