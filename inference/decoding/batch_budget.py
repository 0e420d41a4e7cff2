"""`BatchBudget`: cost-aware drafting across a batch (`tree.budget=auto`, `chain.window=auto` at concurrency > 1).

A batched round runs one ragged verify forward for every live row; the rows' real tokens run packed
through every per-token op, so a round costs about what its real tokens cost, whatever the widest row
(`inference.targets.ragged_forward`). Two choices per round, both from measured costs:

- **Whether the batch drafts** (before drafting): the batch drafts while its drafting rounds commit more
  tokens per second of wall time (every row's tokens over the whole round: the drafts, the verify, the
  judging and commits) than its plain rounds do. Otherwise every row decodes plainly (draft size 0), and
  drafting is tried again after a pause that doubles while it keeps losing: one `DraftGate` over whole
  rounds per concurrency, kept by the decoder across batched runs (as the batch-1 decoder keeps its own).
  Its rates are in units of the live rows' plain rate (a round's tokens per row over its seconds in plain
  rounds of those rows, from the verify curve), so that a draining batch's rounds, which commit fewer
  tokens for a cheaper forward, are judged on the same scale as a full batch's and feed the same gate: a
  gate per live-row count explored again at every row count a drain passed through.
  The gate is the batch's, not each row's: in a synchronous round every row waits for every draft, so a
  row's drafting costs the others what a per-row rate cannot see, and a plain row in a drafting round
  would measure the drafting rows' cost as its own.
- **How many drafts each row keeps**: every drafting row's best-first drafts (every prefix is a valid
  draft) compete in one list, the most likely first (`merged_gains`), and the batch keeps the first t of
  them for the t that maximises its expected committed tokens per second, (live rows + the t drafts'
  acceptances) / (the round's draft seconds + verify(B rows, B + t tokens, L)). A row whose drafts are
  likely keeps many while a row whose drafts are not keeps none; t = 0 verifies every root alone.

verify(T, L) is a `VerifyCurve` over the batch's real tokens T and the longest row's cached tokens L
(every row's queries attend over that many key slots), measured with ragged forwards of B rows x equal
widths over a batch of cached prompts at two lengths (`measure_batch_curve`, once per decoder and
concurrency), then corrected by the verify forwards the rounds time (`ObservedCosts` per rows and real
tokens, kept by the decoder per concurrency; `calibrate=False` takes the curve as given): one
measurement with random prompts, in one moment, would otherwise steer every round of the run, and a
packed forward of unequal rows attends over a padded layout the equal widths do not have. B is the rows
the forward computes: the live rows (a draining batch moves them first and runs them alone,
`BatchedDecoder`).
DominoTree's conditional scores and DDTree's marginal ones enter only as the acceptances of their drafts
(`AcceptanceModel`), so both compete under the same rule. Verification is unchanged, so every choice
stays lossless.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import torch

from inference.decoding.cost_model import DEFAULT_WINDOWS, FAR_CONTEXT, ObservedCosts, VerifyCurve, time_in_turn
from inference.decoding.draft_gate import DraftGate
from inference.decoding.sampling import sample
from inference.decoding.speculative import Candidates, DecodeState, SpeculativeDecoder, Verdict, VerifyWindow
from inference.decoding.stats import GenerationStats
from inference.decoding.tree.build import Leading, RowsJudge
from inference.targets.adapter import TargetModel
from inference.targets.ragged_window import RaggedWindow


def merged_gains(gains: dict[int, Sequence[float]]) -> list[tuple[int, float]]:
    """Every row's drafts as (row, acceptance), the most likely first across the batch and each row's in
    its own best-first order (a row's k-th draft comes after its first k - 1, so the first t of the list
    keep a prefix of every row's draft); ties go to the lower row."""
    heap = [(-g[0], r, 0) for r, g in gains.items() if g]
    heapq.heapify(heap)
    order = []
    while heap:
        gain, r, k = heapq.heappop(heap)
        order.append((r, -gain))
        if k + 1 < len(gains[r]):
            heapq.heappush(heap, (-gains[r][k + 1], r, k + 1))
    return order


def batch_prefix_settled(gains: Sequence[float], bound: float | None, rows: int, costs: Sequence[float]) -> bool:
    """Whether the drafts built so far already hold the batch's best choice (`BatchBudget.settle`), so that
    a builder may stop: `gains` = the acceptances of the drafts that surely lead their rows' best-first
    orders, `bound` = the most any draft not yet built could gain (None: no row can build more), `costs[t]`
    = seconds of a round that keeps t drafts (at least what it drafted so far, plus its verify). True when
    no choice of m drafts with some not yet built (at best the m largest of `gains` and m copies of
    `bound`) can reach the rate of the best prefix of `gains`, for every m up to len(costs) - 1 (as
    `budget.prefix_settled` for one row)."""
    if bound is None:
        return True
    gains = sorted(gains, reverse=True)
    expected = float(rows)
    surely = expected / costs[0]
    for t, gain in enumerate(gains[: len(costs) - 1], 1):
        expected += gain
        surely = max(surely, expected / costs[t])
    expected, i = float(rows), 0
    for m in range(1, len(costs)):
        if i < len(gains) and gains[i] >= bound:
            expected += gains[i]
            i += 1
        else:
            expected += bound
        if expected / costs[m] > surely:
            return False
    return True


@torch.inference_mode()
def measure_batch_curve(
    target: TargetModel,
    rows: int,
    prompt_tokens: int,
    widths: list[int],
    layer_ids: list[int] | None = None,
    repeats: int = 5,
    seed: int = 0,
    far: int | None = FAR_CONTEXT,
) -> VerifyCurve:
    """Median seconds of a ragged forward of `rows` rows x each width after cached random prompts of
    `prompt_tokens` tokens (`time_in_turn`), and again after `far` more cached tokens (None: once), as a
    curve over total tokens (rows x width)."""
    g = torch.Generator().manual_seed(seed)
    vocab, device = target.config.vocab_size, target.device
    widths = sorted(set(widths))

    def timed_after(length: int) -> list[float]:
        cache = target.new_ragged_cache(rows, capacity=length + widths[-1] + 1)
        prompts = [torch.randint(0, vocab, (length,), generator=g).to(device) for _ in range(rows)]
        target.prefill_ragged(prompts, cache, layer_ids=layer_ids)
        inputs = {
            w: RaggedWindow.prompts([torch.randint(0, vocab, (w,), generator=g) for _ in range(rows)], 0, device)
            for w in widths
        }

        def reset() -> None:
            for r in range(rows):
                cache.crop(r, length)

        run = lambda w: target.forward_ragged(inputs[w], cache, layer_ids=layer_ids)  # noqa: E731
        return time_in_turn(run, reset, widths, repeats, device)

    start = max(prompt_tokens, 1)
    tokens = [rows * w for w in widths]
    if not far:
        return VerifyCurve(tokens, timed_after(start), start)
    return VerifyCurve(tokens, timed_after(start), start, timed_after(start + far), start + far)


class _PlainRound:
    """A row's draft in a round the batch decodes plainly: the root alone, judged as `ar` judges its step."""


PLAIN = _PlainRound()


class BatchBudget:
    """The row rule of a cost-aware decoder in a batch (see the module doc): `start_round` asks the batch's
    gate, `draft` is per row, `settle` chooses the round's width over the drafted rows, `end_round` feeds
    the gate the round's tokens and seconds."""

    def __init__(self, decoder: SpeculativeDecoder, concurrency: int, calibrate: bool = True) -> None:
        self.decoder, self.concurrency, self.calibrate = decoder, concurrency, calibrate
        self.layer_ids, self.drafter = decoder.layer_ids, decoder.drafter
        self.curve: VerifyCurve | None = decoder.batch_curves.get(concurrency)
        self.timed: ObservedCosts | None = decoder.batch_costs.get(concurrency) if calibrate else None
        self.drafting = True  # this round's gate decision (`start_round`)
        self.catch_up_s = 0.0  # this round's projection of context the plain rounds left waiting

    def prepare(self, prompt_tokens: int) -> VerifyCurve:
        """The batch verify curve (measured once per decoder and concurrency, before the first round)."""
        if self.curve is None:
            widths = [w for w in DEFAULT_WINDOWS if w <= self.max_window()] or [1]
            rows = self.concurrency
            self.curve = measure_batch_curve(self.decoder.target, rows, prompt_tokens, widths, self.layer_ids)
            self.decoder.batch_curves[self.concurrency] = self.curve
        if self.calibrate and self.timed is None:
            self.timed = self.decoder.batch_costs.setdefault(self.concurrency, ObservedCosts(self.curve))
        return self.curve

    def max_window(self) -> int:
        return self.decoder.max_window()

    def gate(self) -> DraftGate:
        """The batch's gate at this concurrency, kept by the decoder across runs. Its first round is plain,
        so that drafting is judged against a measured plain round (the curve's one-token cost leaves out
        the judge and commit of every row)."""
        gates = self.decoder.batch_gates
        if self.concurrency not in gates:
            gates[self.concurrency] = DraftGate(self.decoder.options.draft_gate, pause=1)
        return gates[self.concurrency]

    def start_round(self) -> None:
        """Ask the gate whether this round drafts (once per round, before any row drafts)."""
        self.drafting = self.gate().drafting()

    def draft_blocks(self, states: list[DecodeState]) -> None:
        """The backbone of every row in one forward, in a round the batch drafts. A retry's first round
        projects the context the plain rounds left waiting before, timed apart (`DraftGate.reopening`)."""
        self.catch_up_s = 0.0
        if not self.drafting:
            return
        if self.gate().reopening():
            t0 = self.decoder.clock.now()
            self.drafter.flush_contexts([s.draft_cache for s in states])
            self.catch_up_s = self.decoder.clock.now() - t0
        self.decoder.draft_blocks(states, self.build_rule(states))

    def build_rule(self, states: list[DecodeState]) -> RowsJudge:
        """When a batched build may stop (`build.best_first_rows`'s `enough`: DominoTree's head steps): once
        the nodes every row built hold the batch's best choice whatever the nodes still to build
        (`batch_prefix_settled`), on this round's costs: the seconds drafted so far, then the verify of the
        live rows and t drafts after the longest row's context."""
        clock = self.decoder.clock
        rows, started = len(states), clock.now()
        context = max(s.length for s in states)
        verify: list[float] = []

        def enough(leading: dict[int, Leading]) -> bool:
            predict = self.decoder.acceptance.predict
            if not verify:  # the first judgement of the round: every t the batch's trees could keep
                limit = rows * (self.max_window() - 1)
                verify.extend(self.cost(rows, rows + t, context) for t in range(limit + 1))
            bound = max(node.bound for node in leading.values())
            most = predict([bound])[0] if bound > float("-inf") else None
            gains = [g for node in leading.values() for g in predict(node.scores)]
            drafted = clock.now() - started
            return batch_prefix_settled(gains, most, rows, [drafted + v for v in verify])

        return enough

    def draft(self, state: DecodeState) -> Candidates | Any:
        """The row's full best-first draft (`Candidates`, sized by `settle`), or its plain round's empty
        draft when nothing more can be emitted, or `PLAIN` when the batch's gate says drafting does not
        pay: that row then runs `ar`'s step (the root alone, the target's own choice after it) without the
        method's empty-draft machinery, so that a plain round costs what a batched `ar` round costs."""
        if self.drafting:
            built = self.decoder.candidates(state)
            return built if built is not None else self.decoder.no_draft(state)
        state.stats.plain_rounds += 1
        state.stats.draft_sizes.append(0)
        state.stats.predicted.append(1.0)
        return PLAIN

    def cost(self, rows: int, tokens: int, context: int | None = None) -> float:
        """Seconds of a batch verify of `tokens` real tokens over `rows` rows whose longest row has `context`
        cached tokens (None: the curve's prompt), never 0."""
        if self.timed is not None:
            return max(self.timed(tokens, context, rows), 1e-9)
        return max(self.curve(tokens, context), 1e-9)

    def settle(
        self,
        states: dict[int, DecodeState],
        drafts: dict[int, Any],
        draft_s: float,
        batch_rows: int,
        context: int | None = None,
    ) -> tuple[dict[int, Any], int]:
        """Each drafting row's kept prefix, the batch's drafts chosen together (module doc); returns the
        drafts and the round's real tokens. `draft_s`: the seconds this round already spent drafting;
        `batch_rows`: the rows the forward runs; `context`: the longest row's cached tokens, which every
        row's queries attend over."""
        built = {r: d for r, d in drafts.items() if isinstance(d, Candidates)}
        order = merged_gains({r: b.gains for r, b in built.items()})
        kept = dict.fromkeys(built, 0)
        best_t, best_rate, expected = 0, -1.0, float(len(drafts))
        for t in range(len(order) + 1):
            if t:
                expected += order[t - 1][1]
            if (rate := expected / (draft_s + self.cost(batch_rows, batch_rows + t, context))) > best_rate:
                best_t, best_rate = t, rate
        for r, _ in order[:best_t]:
            kept[r] += 1
        settled = dict(drafts)
        for r, b in built.items():
            settled[r] = self.decoder.keep(states[r], b, kept[r])
        return settled, batch_rows + best_t

    def end_round(
        self,
        drafted: bool,
        tokens: int,
        seconds: float,
        rows: int,
        batch_rows: int,
        tokens_verified: int | None = None,
        verify_s: float | None = None,
        context: int | None = None,
    ) -> None:
        """Feed the gate one round: `tokens` committed by its `rows` live rows in `seconds` of wall time
        (drafts, the forward, every judge and commit), `drafted` when any row drafted; the gate sees the
        round's rate over the plain rate of `rows` rows in a forward of `batch_rows` (module doc), so a
        plain round of any size scores about 1; a retry's catch-up projection is left out. The round's
        verify forward (`tokens_verified` real tokens over `batch_rows` rows, None: one a row, in
        `verify_s`, its longest row after `context` cached tokens) corrects the cost curve first."""
        if self.timed is not None and verify_s is not None:
            self.timed.observe(tokens_verified or batch_rows, verify_s, context, batch_rows)
        plain_round = self.cost(batch_rows, batch_rows, context)  # seconds of a plain round's forward, these rows
        self.gate().record(drafted, tokens * plain_round / rows, seconds - self.catch_up_s, plain_estimate=1.0)

    def verify_window(self, state: DecodeState, draft: Any) -> VerifyWindow:
        if draft is PLAIN:
            return VerifyWindow(state.root.view(1, 1))
        return self.decoder.verify_window(state, draft)

    def judge(self, state: DecodeState, draft: Any, logits: torch.Tensor, features: torch.Tensor | None) -> Verdict:
        if draft is PLAIN:
            token = sample(logits[:1], self.decoder.sampling, state.generator)
            return Verdict(tokens=token.tolist(), features=features, logits=logits[:1])
        return self.decoder.judge(state, draft, logits, features)

    def commit(
        self, state: DecodeState, verdict: Verdict, tokens: list[int], stats: GenerationStats
    ) -> tuple[bool, bool]:
        """The decoder's commit; a plain round's root is the argmax it was sampled as, so it is not audited
        again (greedy: the same reduction over the same row)."""
        return self.decoder.commit(state, verdict, tokens, stats, audit=self.drafting)
