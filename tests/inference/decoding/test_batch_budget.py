"""`BatchBudget` (inference/decoding/batch_budget.py): the rows' draft sizes chosen together over the
batch's real tokens, and the batch's gate over whole rounds, on hand-made costs and acceptances."""

import pytest
import torch

from inference.decoding.batch_budget import PLAIN, BatchBudget, batch_prefix_settled, best_choice, merged_gains
from inference.decoding.cost_model import VerifyCurve
from inference.decoding.draft_cap import START, STAY, TRIAL
from inference.decoding.draft_gate import FIRST_PAUSE, PROBE_ROUNDS
from inference.decoding.options import DecodeOptions
from inference.decoding.speculative import Candidates, DecodeState
from inference.decoding.stats import GenerationStats


class _Draft(list):
    def prefix(self, n):
        return _Draft(self[:n])


class _Decoder:
    """What `BatchBudget` reads of a cost-aware decoder."""

    layer_ids, drafter = [0], None
    options = DecodeOptions()

    def candidates(self, state):
        return "drafted"

    def __init__(self, curve: VerifyCurve) -> None:
        self.batch_curves, self.batch_gates, self.batch_costs, self.batch_caps = {2: curve}, {}, {}, {}

    def max_window(self) -> int:
        return 9

    def keep(self, state, built, n):
        state.stats.draft_sizes.append(n)
        return built.draft.prefix(n)


def _state() -> DecodeState:
    return DecodeState(None, None, torch.tensor([0]), 4, 100, None, GenerationStats(prompt_tokens=4))


def _settle(curve: VerifyCurve, gains: dict[int, list[float]], draft_s: float = 0.0, context: int | None = None):
    budget = BatchBudget(_Decoder(curve), 2)
    states = {r: _state() for r in gains}
    drafts = {r: Candidates(_Draft(range(len(g))), g, None) for r, g in gains.items()}
    settled, tokens = budget.settle(states, drafts, draft_s, batch_rows=2, context=context)
    return {r: len(d) for r, d in settled.items()}, tokens


def test_a_flat_verify_keeps_every_draft_and_a_steep_one_none():
    gains = {0: [0.9, 0.8, 0.5], 1: [0.6]}
    flat = VerifyCurve([2, 8], [0.010, 0.010], 16)
    assert _settle(flat, gains) == ({0: 3, 1: 1}, 6)  # 2 roots + 4 drafts
    steep = VerifyCurve([2, 8], [0.010, 0.100], 16)
    assert _settle(steep, gains) == ({0: 0, 1: 0}, 2)  # every root alone


def test_a_batch_grown_long_verifies_narrower():
    """Every row's queries attend over the longest row's cached keys: drafts that pay over the curve's
    prompts do not over a context four times longer, where a window of 4 costs what the far timing says."""
    gains = {0: [0.9, 0.8, 0.5], 1: [0.6]}
    curve = VerifyCurve([2, 8], [0.010, 0.010], 16, far_seconds=[0.010, 0.040], far_tokens=528)
    assert _settle(curve, gains, context=16) == ({0: 3, 1: 1}, 6)
    assert _settle(curve, gains, context=2000) == ({0: 0, 1: 0}, 2)


def test_timed_verify_forwards_correct_a_curve_that_was_too_cheap():
    """A curve measured flat (a short prompt, a quiet moment) while the run's forwards over 2 x 4 tokens
    take 10x longer: after one such round the batch keeps less; without calibration it does not learn."""
    gains = {0: [0.9, 0.8, 0.5], 1: [0.6]}
    for calibrate, expected in ((True, 2), (False, 6)):
        budget = BatchBudget(_Decoder(VerifyCurve([2, 8], [0.010, 0.010], 16)), 2, calibrate=calibrate)
        budget.prepare(16)  # the curve is given: nothing is measured
        budget.end_round(False, 2, 0.011, rows=2, batch_rows=2, tokens_verified=2, verify_s=0.010)
        budget.end_round(True, 4, 0.110, rows=2, batch_rows=2, tokens_verified=8, verify_s=0.100)
        states = {r: _state() for r in gains}
        drafts = {r: Candidates(_Draft(range(len(g))), g, None) for r, g in gains.items()}
        assert budget.settle(states, drafts, 0.0, batch_rows=2)[1] == expected, calibrate


def test_the_draft_sizes_maximise_the_batch_tokens_per_second():
    """Every split of the drafts between the rows, scored by brute force: `settle` keeps the best one,
    each row's drafts a prefix of its own."""
    gains = {0: [0.9, 0.8, 0.1], 1: [0.9, 0.2, 0.1]}
    curve = VerifyCurve([2, 4, 6, 8], [0.010, 0.011, 0.020, 0.030], 16)
    rates = {(a, b): (2 + sum(gains[0][:a]) + sum(gains[1][:b])) / curve(2 + a + b) for a in range(4) for b in range(4)}
    best = max(rates, key=rates.get)
    assert best == (1, 1) and _settle(curve, gains) == ({0: 1, 1: 1}, 4)
    assert _settle(curve, gains, draft_s=1.0)[1] == 8  # sunk drafting dwarfs the verify: keep everything


def test_a_row_that_drafts_well_keeps_its_draft_while_a_row_that_does_not_keeps_none():
    """A forward runs the rows' real tokens packed, so one row's long draft no longer costs every row its
    width: the confident row keeps four drafts, the unsure one none (padded to one width, those four would
    cost 2 x 5 tokens, and the best single width kept three and two)."""
    gains = {0: [0.95, 0.9, 0.85, 0.8], 1: [0.1, 0.05]}
    curve = VerifyCurve([2, 4, 6, 8, 10], [0.010, 0.011, 0.012, 0.013, 0.030], 16)
    assert _settle(curve, gains) == ({0: 4, 1: 0}, 6)


def test_a_batch_whose_drafting_rounds_do_not_pay_decodes_plainly_for_a_while():
    curve = VerifyCurve([2, 8], [0.010, 0.012], 16)
    budget = BatchBudget(_Decoder(curve), 2)
    budget.gate().probe_share = None  # the round pause alone (test_draft_gate bounds it by the lost seconds)
    budget.start_round()
    assert not budget.drafting  # the first round measures plain decoding
    budget.end_round(False, 2, 0.010, rows=2, batch_rows=2)  # 2 tokens in 10 ms
    for _ in range(PROBE_ROUNDS):  # 3 tokens in a 60 ms drafting round: losing
        budget.start_round()
        assert budget.drafting
        budget.end_round(True, 3, 0.060, rows=2, batch_rows=2)
    plain = []
    for _ in range(4):
        budget.start_round()
        plain.append(not budget.drafting)
        state = _state()
        assert budget.draft(state) is PLAIN and state.stats.draft_sizes == [0] and state.stats.plain_rounds == 1
    assert plain == [True, True, True, True]  # the first pause: 4 plain rounds for every row
    budget.start_round()
    assert budget.drafting  # tried again
    paying = BatchBudget(_Decoder(curve), 2)
    paying.start_round()
    paying.end_round(False, 2, 0.010, rows=2, batch_rows=2)
    for _ in range(PROBE_ROUNDS):  # 8 tokens in 16 ms: 500 tokens/s against 200
        paying.end_round(True, 8, 0.016, rows=2, batch_rows=2)
    paying.start_round()
    assert paying.drafting and paying.draft(_state()) == "drafted"


class _Clock:
    t = 0.0

    def now(self) -> float:
        return self.t


def _flushing(curve: VerifyCurve) -> tuple[_Decoder, _Clock, list[int]]:
    """A decoder on a hand-moved clock whose drafter's catch-up projection takes 50 ms and logs its rows."""
    decoder = _Decoder(curve)
    clock = decoder.clock = _Clock()
    flushed: list[int] = []

    class _Drafter:
        def flush_contexts(self, caches):
            flushed.append(len(caches))
            clock.t += 0.050

    decoder.drafter = _Drafter()
    return decoder, clock, flushed


def test_a_retrys_catch_up_projection_is_left_out_of_its_rate():
    """The first drafting round after plain rounds projects the context they committed (here 50 ms, once):
    a debt of the pause, not a cost of drafting from now on, so the gate judges the retry without it."""
    decoder, clock, flushed = _flushing(VerifyCurve([2, 8], [0.010, 0.012], 16))
    limits = []
    decoder.draft_blocks = lambda states, enough, limit: limits.append(limit)
    budget = BatchBudget(decoder, 2)
    budget.start_round()
    budget.end_round(False, 2, 0.010, rows=2, batch_rows=2)  # plain: 200 tokens / s
    for _ in range(PROBE_ROUNDS):  # 3 tokens in 10 ms of drafting: 1.5x plain
        budget.start_round()
        clock.t = 0.0
        budget.draft_blocks([_state(), _state()])
        budget.end_round(True, 3, clock.t + 0.010, rows=2, batch_rows=2)
    assert flushed == [2]  # both rows, in the probe's first round only
    assert limits == [START] * PROBE_ROUNDS  # the rows' trees built no larger than the round's cap
    assert budget.gate().draft_rate == pytest.approx(1.5) and budget.gate().pause == 0


def test_the_catch_up_after_another_row_counts_plain_round_is_timed_apart():
    """Gates are per live-row count, so a round can draft under a gate with no pause of its own right after
    a plain round of another: that round's draft still owes the plain round's context, timed apart."""
    decoder, _, flushed = _flushing(VerifyCurve([1, 2, 8], [0.008, 0.010, 0.012], 16))
    decoder.draft_blocks = lambda states, enough, limit: None
    budget = BatchBudget(decoder, 2)
    one = budget.gate(1)
    one.pause, one.probe_left, one.plain_rate, one.draft_rate = 0, 0, 1.0, 2.0  # one row: drafting, settled
    budget.start_round(2)
    assert not budget.drafting  # the full batch's first round is plain
    budget.draft_blocks([_state(), _state()])
    budget.start_round(1)
    assert budget.drafting and not one.reopening()
    budget.draft_blocks([_state()])
    assert flushed == [1] and budget.catch_up_s == pytest.approx(0.050)
    budget.start_round(1)
    budget.draft_blocks([_state()])
    assert flushed == [1] and budget.catch_up_s == 0.0  # after a drafting round nothing is owed


def test_the_batch_gate_compares_whole_rounds_and_is_kept_across_batched_runs():
    curve = VerifyCurve([2, 8], [0.010, 0.012], 16)
    budget = BatchBudget(_Decoder(curve), 2)
    for _ in range(3):
        budget.end_round(False, 2, 0.011, rows=2, batch_rows=2)  # plain rounds: 2 tokens in 11 ms
    for _ in range(PROBE_ROUNDS):  # 150 tokens/s against ~182: losing
        budget.end_round(True, 3, 0.020, rows=2, batch_rows=2)
    again = BatchBudget(budget.decoder, 2)
    assert again.gate() is budget.gate()  # kept by the decoder: a new run does not relearn that drafting loses
    again.start_round()
    assert not again.drafting and again.gate().pause == 3


def test_a_draining_batch_has_its_own_gate_per_live_row_count():
    """Whether drafting pays depends on how many rows share the forward: a full batch where drafting loses
    pauses its own gate, and the same batch draining to one row, where drafting wins, is judged apart
    (starting, like the full batch, with one plain round and a probe) instead of inheriting that pause."""
    curve = VerifyCurve([1, 2, 8], [0.008, 0.010, 0.012], 16)
    budget = BatchBudget(_Decoder(curve), 2)
    budget.start_round(2)
    assert not budget.drafting  # the first round measures plain decoding
    budget.end_round(False, 2, 0.010, rows=2, batch_rows=2)  # full: 200 tokens / s = the curve's plain rate
    assert budget.gate(2).plain_rate == pytest.approx(1.0)
    for _ in range(PROBE_ROUNDS):  # full drafting rounds at 0.75x the plain rate: losing
        budget.start_round(2)
        assert budget.drafting
        budget.end_round(True, 3, 0.020, rows=2, batch_rows=2)
    budget.start_round(2)
    assert not budget.drafting and budget.gate().pause == FIRST_PAUSE - 1
    budget.start_round(1)
    assert not budget.drafting  # one row: its own first plain round, not the full batch's pause
    budget.end_round(False, 1, 0.008, rows=1, batch_rows=1)  # 125 tokens / s, its rows' plain rate
    assert budget.gate(1).plain_rate == pytest.approx(1.0)
    for _ in range(PROBE_ROUNDS):  # one row drafting at 2x its plain rate
        budget.start_round(1)
        assert budget.drafting
        budget.end_round(True, 2, 0.008, rows=1, batch_rows=1)
    budget.start_round(1)
    assert budget.drafting and budget.gate(1).draft_rate == pytest.approx(2.0)
    assert budget.gate(2).pause == FIRST_PAUSE - 1  # the full batch's gate untouched by the drain
    assert BatchBudget(budget.decoder, 2).gate(1) is budget.gate(1)  # kept by the decoder, per row count


def test_a_build_may_stop_once_no_draft_still_to_build_could_be_kept():
    """`batch_prefix_settled`: 2 rows, a round of 10 ms + 1 ms per kept draft. Built drafts of 0.9 and 0.5:
    a draft still to build that gains at most 0.05 could not pay for its millisecond, one of 0.3 could."""

    def cost(t, width):
        return 0.010 + 0.001 * t

    assert batch_prefix_settled({0: [0.9], 1: [0.5]}, 0.05, 2, cost, 8)
    assert not batch_prefix_settled({0: [0.9], 1: [0.5]}, 0.3, 2, cost, 8)
    assert batch_prefix_settled({0: [0.9], 1: [0.5]}, None, 2, cost, 8)  # no row can build more
    assert not batch_prefix_settled({0: [], 1: []}, 0.3, 2, cost, 8)  # nothing built yet, and a draft of 0.3 pays


def test_pad_slots_make_a_lopsided_choice_dearer():
    """A forward is as wide as its widest row: with pad slots priced, two rows' first drafts beat one row's
    second (the same acceptance), and a batch curve's pad cost grows with the context."""
    curve = VerifyCurve([2, 64], [0.010, 0.010 + 62e-3], 16, far_seconds=[0.012, 0.080], far_tokens=528)
    curve.pad_seconds = [0.5e-3, 1.5e-3]
    assert curve.pad(16) == pytest.approx(0.5e-3) and curve.pad(528) == pytest.approx(1.5e-3)
    assert curve.pad(272) == pytest.approx(1.0e-3)
    budget = BatchBudget(_Decoder(curve), 2, calibrate=False)
    cost = budget.verify_costs(2, 16, 4)
    assert cost(2, 3) == pytest.approx(curve(4, 16) + 2 * 0.5e-3)  # 2 drafts in row 0, row 1: 2 pad slots
    assert cost(2, 2) == pytest.approx(curve(4, 16))  # one draft a row: no pad
    order = [(0, 0.7), (0, 0.6), (1, 0.6)]  # row 0's second draft before row 1's first
    kept, _ = best_choice(order, 2, cost)
    assert kept in ({0: 1, 1: 1}, {0: 1}, {0: 2, 1: 1})  # never row 0's two drafts without row 1's
    assert best_choice(order, 2, lambda t, width: 1.0 + 0.01 * t + 10.0 * (width - 1 - t / 2))[0] == {0: 1, 1: 1}
    flat = BatchBudget(_Decoder(VerifyCurve([2, 64], [0.010, 0.072], 16)), 2, calibrate=False)
    assert flat.pad(16) == 0.0  # a curve without pad timings prices none


def test_the_caps_trial_judges_the_rounds_expected_tokens_not_their_luck():
    """Which drafts a round accepts is a coin toss: a trial whose rival cap's rounds were expected to commit
    more but happened to commit less moves the cap to the rival (seconds equal), as the gate would judge."""
    curve = VerifyCurve([2, 8], [0.010, 0.012], 16)
    budget = BatchBudget(_Decoder(curve), 2, calibrate=False)
    budget.gate().enabled = False  # every round drafts
    cap = budget.cap()
    cap.left = 1
    budget.start_round()
    budget.end_round(True, 3, 0.010, rows=2, batch_rows=2, width=1 + START, expected=3.0)  # the trial starts
    assert cap.rival == START + 1
    for _ in range(2 * TRIAL):
        budget.start_round()
        if budget.row_cap == START + 1:  # expected 4 tokens, committed 2
            budget.end_round(True, 2, 0.010, rows=2, batch_rows=2, width=2 + START, expected=4.0)
        else:  # expected 3, committed 3
            budget.end_round(True, 3, 0.010, rows=2, batch_rows=2, width=1 + START, expected=3.0)
    assert cap.cap == START + 1 and cap.moves == [START, START + 1]


def test_a_rounds_cap_bounds_every_rows_drafts_and_learns_from_the_rounds():
    """Under the round's cap (`DraftCap`) a row keeps at most that many drafts, the others' as the cost rule
    chooses; the rounds' rates in plain-round units and their widest rows feed the cap's trials."""
    gains = {0: [0.95, 0.9, 0.85, 0.8], 1: [0.9, 0.05]}
    curve = VerifyCurve([2, 4, 6, 8, 10], [0.010, 0.011, 0.012, 0.013, 0.030], 16)
    assert best_choice(merged_gains(gains), 2, lambda t, width: curve(2 + t))[0] == {0: 4, 1: 1}
    assert best_choice(merged_gains(gains), 2, lambda t, width: curve(2 + t), cap=2)[0] == {0: 2, 1: 1}
    budget = BatchBudget(_Decoder(curve), 2, calibrate=False)
    budget.gate().enabled = False  # every round drafts
    states = {r: _state() for r in gains}
    widest = []
    for _ in range(STAY + 2 * TRIAL):
        budget.start_round()
        drafts = {r: Candidates(_Draft(range(len(g))), g, None) for r, g in gains.items()}
        settled, _ = budget.settle(states, drafts, 0.0, batch_rows=2)
        most = max(map(len, settled.values()))
        widest.append((budget.row_cap, most))
        budget.end_round(True, 2 + most, curve(2 + most), rows=2, batch_rows=2, width=1 + most)
    assert widest[:STAY] == [(START, START)] * STAY  # the cap binds row 0
    assert widest[STAY] == (START + 1, START + 1)  # then a trial of the next cap up, which binds too
    assert budget.cap().cap == START + 1  # and pays: 5 tokens in 11.5 ms beat 4 in 11
    assert BatchBudget(budget.decoder, 2).cap() is budget.cap()  # kept by the decoder, as the gate
    off = _Decoder(curve)
    off.options = DecodeOptions(draft_gate=False)
    lifted = BatchBudget(off, 2)
    lifted.start_round()
    assert lifted.row_cap is None  # draft_gate=false: the cost rule's free choice
