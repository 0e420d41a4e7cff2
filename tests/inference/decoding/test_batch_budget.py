"""`BatchBudget` (inference/decoding/batch_budget.py): the round's width across the batch and the rows'
gates, on hand-made costs and acceptances."""

import torch

from inference.decoding.batch_budget import BatchBudget
from inference.decoding.cost_model import VerifyCurve
from inference.decoding.draft_gate import DraftGate
from inference.decoding.speculative import Candidates, DecodeState
from inference.decoding.stats import GenerationStats


class _Draft(list):
    def prefix(self, n):
        return _Draft(self[:n])


class _Decoder:
    """What `BatchBudget` reads of a cost-aware decoder."""

    layer_ids, drafter = [0], None

    def __init__(self, curve: VerifyCurve) -> None:
        self.batch_curves, self.batch_gates = {2: curve}, {}

    def keep(self, state, built, n):
        state.stats.draft_sizes.append(n)
        return built.draft.prefix(n)


def _state() -> DecodeState:
    return DecodeState(None, None, torch.tensor([0]), 4, 100, None, GenerationStats(prompt_tokens=4))


def _settle(curve: VerifyCurve, gains: dict[int, list[float]], draft_s: float = 0.0):
    budget = BatchBudget(_Decoder(curve), 2)
    states = {r: _state() for r in gains}
    drafts = {r: Candidates(_Draft(range(len(g))), g, None) for r, g in gains.items()}
    settled, width = budget.settle(states, drafts, draft_s, batch_rows=2)
    return {r: len(d) for r, d in settled.items()}, width


def test_a_flat_verify_keeps_every_draft_and_a_steep_one_none():
    gains = {0: [0.9, 0.8, 0.5], 1: [0.6]}
    flat = VerifyCurve([2, 8], [0.010, 0.010], 16)
    assert _settle(flat, gains) == ({0: 3, 1: 1}, 4)  # the widest row sets W; a shorter row keeps all it has
    steep = VerifyCurve([2, 8], [0.010, 0.100], 16)
    assert _settle(steep, gains) == ({0: 0, 1: 0}, 1)  # every root alone


def test_the_width_maximises_the_batch_tokens_per_second():
    gains = {0: [0.9, 0.8, 0.1], 1: [0.9, 0.2, 0.1]}
    curve = VerifyCurve([2, 4, 6, 8], [0.010, 0.011, 0.020, 0.030], 16)
    rates = {w: (2 + sum(sum(g[: w - 1]) for g in gains.values())) / curve(2 * w) for w in (1, 2, 3, 4)}
    best = max(rates, key=rates.get)
    assert best == 2 and _settle(curve, gains) == ({0: 1, 1: 1}, 2)
    assert _settle(curve, gains, draft_s=1.0)[1] == 4  # sunk drafting dwarfs the verify: keep everything


def test_a_row_whose_drafts_do_not_pay_decodes_plainly_for_a_while():
    curve = VerifyCurve([2, 8], [0.010, 0.012], 16)
    budget = BatchBudget(_Decoder(curve), 2)
    state = _state()
    state.gate = DraftGate()
    budget.record(state, True, 1, draft_s=0.050, verify_s=0.006, rows=2, batch_rows=2)  # 1 token in 56 ms
    # against a plain row's 200 tokens/s (its share of a 10 ms one-token verify of 2 rows)
    assert not state.gate.drafting() and state.gate.pause == 3
    other = _state()
    other.gate = DraftGate()
    budget.record(other, True, 4, draft_s=0.002, verify_s=0.006, rows=2, batch_rows=2)  # 4 tokens in 8 ms
    assert other.gate.drafting()


def test_a_new_sequence_starts_from_what_earlier_rows_measured():
    curve = VerifyCurve([2, 8], [0.010, 0.012], 16)
    budget = BatchBudget(_Decoder(curve), 2)
    assert budget.new_gate().drafting()  # nothing measured: draft
    for _ in range(3):
        budget.record(_with_gate(), False, 1, draft_s=0.0, verify_s=0.005, rows=2, batch_rows=2)
        budget.record(_with_gate(), True, 1, draft_s=0.050, verify_s=0.006, rows=2, batch_rows=2)
    fresh = budget.new_gate()
    assert not fresh.drafting() and fresh.pause == budget.rates.next_pause - 1 > 0
    assert BatchBudget(budget.decoder, 2).rates is budget.rates  # kept by the decoder across batched runs


def _with_gate() -> DecodeState:
    state = _state()
    state.gate = DraftGate()
    return state
