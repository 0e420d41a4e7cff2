"""`BatchBudget`: cost-aware drafting across a batch (`tree.budget=auto`, `chain.window=auto` at concurrency > 1).

A batched round runs one ragged verify forward for every live row; the rows' real tokens run packed
through every per-token op, but attention runs every row as wide as the widest
(`inference.targets.ragged_forward`), and on a CPU that is not small: on 2 Zen 4 cores (bf16, 4 rows after
400 cached tokens) windows of 9, 1, 1, 1 tokens cost 45 ms where 3, 3, 3, 3 cost 33 and 9, 9, 9, 9 cost 61
(`benchmarks/ragged_widths.py`).
So a round costs its real tokens plus its pad slots. Two choices per round, both from measured costs:

- **Whether the batch drafts** (before drafting): the batch drafts while its drafting rounds commit more
  tokens per second of wall time (every row's tokens over the whole round: the drafts, the verify, the
  judging and commits) than its plain rounds do, a drafting round's tokens read as the ones its kept
  drafts were expected to add, scaled by what drafting rounds committed per expected token so far (which
  drafts a round accepts is a coin toss, and a gate judging that toss shut on unlucky retries). Otherwise
  every row decodes plainly (draft size 0), and drafting is tried again after a pause that doubles while
  it keeps losing: one `DraftGate` over whole rounds per concurrency and live-row count, kept by the
  decoder across batched runs (as the batch-1 decoder keeps its own). Whether drafting pays depends on
  how many rows share the forward: at 8 rows on 2 Zen 4 cores a full batch's drafting rounds gained 10 %
  over its plain rounds while 1-row rounds gain 30-40 % (batch 1), and a drain (the rows left once nothing
  waits) under the full batch's gate inherited its pauses: its 1-row rounds ran 67 % plain, and the drain
  took 18 % of the run's seconds for 12 % of its tokens. So each row count a drain passes through has its
  own gate, which starts, like the full batch's, with one plain round and a probe. Its rates are in units
  of the live rows' plain rate (a round's tokens per row over its seconds in plain rounds of those rows,
  from the verify curve), so a plain round of any size scores about 1.
  The gate is the batch's, not each row's: in a synchronous round every row waits for every draft, so a
  row's drafting costs the others what a per-row rate cannot see, and a plain row in a drafting round
  would measure the drafting rows' cost as its own.
- **How many drafts each row keeps**: every drafting row's best-first drafts (every prefix is a valid
  draft) compete in one list, the most likely first (`merged_gains`), and the batch keeps the drafts that
  maximise its expected committed tokens per second, (live rows + the kept drafts' acceptances) / (the
  round's draft seconds + verify(B rows, B + t tokens, L) + pad(L) x the pad slots of the widest row's
  width W): the first t of the list under each cap on a row's drafts (`best_choice`). A row whose drafts
  are likely keeps more while a row whose drafts are not keeps none, as far as the width pays; t = 0
  verifies every root alone. DominoTree's rows grow their trees together, and the build stops once the
  nodes built hold this choice whatever the nodes still to build (`batch_prefix_settled`).

verify(T, L) is a `VerifyCurve` over the batch's real tokens T and the longest row's cached tokens L
(every row's queries attend over that many key slots), measured with ragged forwards of B rows x equal
widths over a batch of cached prompts at two lengths, pad(L) with one uneven layout beside them
(`measure_batch_curve`, once per decoder and concurrency), then corrected by the verify forwards the
rounds time (`ObservedCosts` per rows and real tokens, kept by the decoder per concurrency;
`calibrate=False` takes the curve as given): one measurement with random prompts, in one moment, would
otherwise steer every round of the run (the timed seconds less the predicted pad slots' correct the real
tokens' part). B is the rows the forward computes: the live rows (a draining batch moves them first and
runs them alone, `BatchedDecoder`).
DominoTree's conditional scores and DDTree's marginal ones enter only as the acceptances of their drafts
(`AcceptanceModel`), so both compete under the same rule. Verification is unchanged, so every choice
stays lossless.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch

from inference.decoding.cost_model import DEFAULT_WINDOWS, FAR_CONTEXT, ObservedCosts, VerifyCurve, time_in_turn
from inference.decoding.draft_cap import DraftCap
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


NEGLIGIBLE = 0.01  # a draft expected to add less than this many tokens is never kept (nor searched over)


def best_choice(
    order: Sequence[tuple[int, float]], rows: int, cost: Callable[[int, int], float], cap: int | None = None
) -> tuple[dict[int, int], float]:
    """The drafts of `order` ((row, acceptance) pairs, `merged_gains`) a round keeps to maximise its
    expected tokens per second, as {row: its first n drafts} (rows keeping none left out), and that rate:
    (rows + their acceptances) / cost(t, width) for t drafts in a forward `width` = 1 + the most one row
    keeps. A forward is as wide as its widest row (the others' columns are pad slots), so the choice is
    the best first t of `order` under each cap on the drafts a row keeps; the smaller choice on ties.
    Drafts below `NEGLIGIBLE` are left out (a best-first tree's tail: most of a 32-node tree's, and the
    search is over caps x drafts). `cap`: the most drafts any row may keep (None: no limit, `DraftCap`)."""
    best: tuple[dict[int, int], float] = ({}, rows / cost(0, 1))
    order = [(r, gain) for r, gain in order if gain >= NEGLIGIBLE]
    most = max(Counter(r for r, _ in order).values(), default=0)
    for limit in range(1, min(most, cap or most) + 1):
        kept: dict[int, int] = {}
        widest, expected, t = 1, float(rows), 0
        for r, gain in order:
            if kept.get(r, 0) == limit:
                continue
            kept[r] = kept.get(r, 0) + 1
            widest, expected, t = max(widest, kept[r] + 1), expected + gain, t + 1
            if (rate := expected / cost(t, widest)) > best[1]:
                best = (dict(kept), rate)
    return best


def batch_prefix_settled(
    gains: dict[int, Sequence[float]], bound: float | None, rows: int, cost: Callable[[int, int], float], limit: int
) -> bool:
    """Whether the drafts built so far already hold the batch's best choice (`BatchBudget.settle`), so that
    a builder may stop: `gains` = each row's acceptances of the drafts that surely lead its best-first
    order, `bound` = the most any draft not yet built could gain (None: no row can build more), `cost(t,
    width)` = seconds of a round that keeps t drafts in a forward `width` wide (at least what it drafted so
    far, plus its verify), `limit` = the most drafts a round may keep. True when no choice of m drafts
    with one or more not yet built (at best: `bound`, then the m - 1 largest of `gains` and copies of
    `bound`, spread as evenly as the rows allow) can reach the rate of the best prefix of the drafts built,
    for every m up to `limit` (as `budget.prefix_settled` for one row)."""
    if bound is None:
        return True
    order = merged_gains(gains)[:limit]
    _, surely = best_choice(order, rows, cost)
    expected, i = float(rows) + bound, 0  # a choice with a draft not yet built: that draft, then the best m - 1
    for m in range(1, limit + 1):
        if m > 1:
            if i < len(order) and order[i][1] >= bound:
                expected += order[i][1]
                i += 1
            else:
                expected += bound
        if expected / cost(m, 1 + -(-m // rows)) > surely:  # m drafts make some row at least this wide
            return False
    return True


PAD_WIDTH = 8  # the widest row of the uneven layout a batch curve times its pad slots with


@torch.inference_mode()
def time_layouts(
    target: TargetModel,
    layouts: list[Sequence[int]],
    context: int,
    layer_ids: list[int] | None = None,
    repeats: int = 5,
    generator: torch.Generator | None = None,
) -> list[float]:
    """Median seconds of a ragged verify forward of each layout (each row's window width) after cached
    random prompts of `context` tokens, one row per width, the layouts timed in turn (`time_in_turn`)."""
    rows = len(layouts[0])
    if any(len(layout) != rows for layout in layouts):
        raise ValueError(f"every layout needs {rows} rows, got {[len(layout) for layout in layouts]}")
    vocab, device = target.config.vocab_size, target.device
    cache = target.new_ragged_cache(rows, capacity=context + max(map(max, layouts)) + 1)
    prompts = [torch.randint(0, vocab, (context,), generator=generator).to(device) for _ in range(rows)]
    target.prefill_ragged(prompts, cache, layer_ids=layer_ids)
    inputs = [
        RaggedWindow.prompts([torch.randint(0, vocab, (w,), generator=generator) for w in layout], 0, device)
        for layout in layouts
    ]

    def reset() -> None:
        for r in range(rows):
            cache.crop(r, context)

    run = lambda i: target.forward_ragged(inputs[i], cache, layer_ids=layer_ids)  # noqa: E731
    return time_in_turn(run, reset, range(len(layouts)), repeats, device)


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
    `prompt_tokens` tokens (`time_layouts`), and again after `far` more cached tokens (None: once), as a
    curve over total tokens (rows x width). With several rows, an uneven layout is timed in the same turns
    (one row `PAD_WIDTH` wide, the others 1 token): what it costs beyond the equal layouts' curve at its
    real tokens, per pad slot, is the curve's `pad_seconds` (a packed forward computes only real tokens,
    but attention runs every row as wide as the widest)."""
    g = torch.Generator().manual_seed(seed)
    widths = sorted(set(widths))
    wide = min(PAD_WIDTH, widths[-1]) if rows > 1 else 1
    uneven = [wide, *[1] * (rows - 1)]
    layouts = [[w] * rows for w in widths] + ([uneven] if wide > 1 else [])
    tokens = [rows * w for w in widths]

    def timed_after(length: int) -> tuple[list[float], float | None]:
        seconds = time_layouts(target, layouts, length, layer_ids, repeats, g)
        if wide == 1:
            return seconds, None
        real = sum(uneven)
        equal = VerifyCurve(tokens, seconds[: len(widths)], length)(real)  # the equal layouts at its real tokens
        return seconds[: len(widths)], max(seconds[-1] - equal, 0.0) / (rows * wide - real)

    start = max(prompt_tokens, 1)
    near, near_pad = timed_after(start)
    if not far:
        return VerifyCurve(tokens, near, start, pad_seconds=None if near_pad is None else [near_pad])
    far_seconds, far_pad = timed_after(start + far)
    pads = None if near_pad is None else [near_pad, far_pad]
    return VerifyCurve(tokens, near, start, far_seconds, start + far, pad_seconds=pads)


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
        self.rows = concurrency  # this round's live rows, whose gate decides (`start_round`)
        self.drafting = True  # this round's gate decision (`start_round`)
        self.after_plain = False  # whether the round before this one was plain
        self.row_cap: int | None = None  # this round's most drafts a row may keep (`DraftCap`; None: none)
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

    def gate(self, rows: int | None = None) -> DraftGate:
        """The gate of `rows` live rows (None: this round's) at this concurrency (module doc), kept by the
        decoder across runs. Its first round is plain, so that drafting is judged against a measured plain
        round (the curve's one-token cost leaves out the judge and commit of every row)."""
        gates, key = self.decoder.batch_gates, (self.concurrency, self.rows if rows is None else rows)
        if key not in gates:
            gates[key] = DraftGate(self.decoder.options.draft_gate, pause=1)
        return gates[key]

    def cap(self) -> DraftCap:
        """The batch's cap on a row's drafts at this concurrency, kept by the decoder across runs (as the
        gate); `draft_gate=false` lifts it with the gate (every round as the cost rule chooses)."""
        caps = self.decoder.batch_caps
        if self.concurrency not in caps:
            caps[self.concurrency] = DraftCap(self.decoder.options.draft_gate, top=max(self.max_window() - 1, 1))
        return caps[self.concurrency]

    def start_round(self, rows: int | None = None) -> None:
        """Ask the gate of `rows` live rows (None: the full batch) whether this round drafts, and the cap
        how many drafts a row may keep (once per round, before any row drafts)."""
        self.rows = self.concurrency if rows is None else rows
        self.after_plain = not self.drafting
        self.drafting = self.gate().drafting()
        self.row_cap = self.cap().current() if self.drafting else None

    def draft_blocks(self, states: list[DecodeState]) -> None:
        """The backbone of every row in one forward, in a round the batch drafts. The first drafting round
        after plain ones projects the context they left waiting before, timed apart: a debt of the plain
        rounds (`DraftGate.reopening`), whichever row count's gate kept them plain."""
        self.catch_up_s = 0.0
        if not self.drafting:
            return
        if self.after_plain:
            t0 = self.decoder.clock.now()
            self.drafter.flush_contexts([s.draft_cache for s in states])
            self.catch_up_s = self.decoder.clock.now() - t0
        self.decoder.draft_blocks(states, self.build_rule(states), self.row_cap)

    def build_rule(self, states: list[DecodeState]) -> RowsJudge:
        """When a batched build may stop (`build.best_first_rows`'s `enough`: DominoTree's head steps): once
        the nodes every row built hold the batch's best choice whatever the nodes still to build
        (`batch_prefix_settled`), on this round's costs: the seconds drafted so far, then the verify of the
        live rows' real tokens and pad slots after the longest row's context. Under the round's cap the
        rows' trees hold no more nodes than it (`draft_blocks`' limit), so a row that built them is complete."""
        clock = self.decoder.clock
        rows, started = len(states), clock.now()
        context = max(s.length for s in states)
        tables: list[Callable[[int, int], float]] = []
        a_row = self.max_window() - 1 if self.row_cap is None else min(self.row_cap, self.max_window() - 1)

        def enough(leading: dict[int, Leading]) -> bool:
            predict, limit = self.decoder.acceptance.predict, rows * a_row
            if not tables:  # the first judgement of the round
                tables.append(self.verify_costs(rows, context, limit))
            verify, drafted = tables[0], clock.now() - started
            bound = max(node.bound for node in leading.values())
            most = predict([bound])[0] if bound > float("-inf") else None
            gains = {r: predict(node.scores) for r, node in leading.items()}
            return batch_prefix_settled(gains, most, rows, lambda t, w: drafted + verify(t, w), limit)

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
        cached tokens (None: the curve's prompt), its pad slots left out (`verify_costs`), never 0."""
        if self.timed is not None:
            return max(self.timed(tokens, context, rows), 1e-9)
        return max(self.curve(tokens, context), 1e-9)

    def verify_costs(self, rows: int, context: int | None, most: int) -> Callable[[int, int], float]:
        """Seconds of the verify of `rows` rows and t <= `most` drafts in a forward `width` wide (the widest
        row's window: the other rows' columns up to it are pad slots, `pad`), as `cost(t, width)`; the real
        tokens' seconds tabulated once, since a round's choice of drafts asks thousands of times."""
        real = [self.cost(rows, rows + t, context) for t in range(most + 1)]
        pad = self.pad(context)
        return lambda t, width: real[t] + pad * max(rows * width - rows - t, 0)

    def pad(self, context: int | None = None) -> float:
        """Seconds of one pad slot of a batch forward after `context` cached tokens (the measured curve's)."""
        return self.curve.pad(context) if self.curve is not None else 0.0

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
        verify = self.verify_costs(batch_rows, context, len(order))
        kept, _ = best_choice(order, len(drafts), lambda t, width: draft_s + verify(t, width), self.row_cap)
        settled = dict(drafts)
        for r, b in built.items():
            settled[r] = self.decoder.keep(states[r], b, kept.get(r, 0))
        return settled, batch_rows + sum(kept.values())

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
        width: int = 1,
        expected: float | None = None,
    ) -> None:
        """Feed the gate of `rows` live rows one round: `tokens` committed by those rows in `seconds` of wall time
        (drafts, the forward, every judge and commit), `drafted` when any row drafted, `expected` the
        tokens the rows were expected to commit (None: not known; the gate then judges `tokens`,
        `draft_gate.py`); the gate sees the round's rate over the plain rate of `rows` rows in a forward of
        `batch_rows` (module doc), so a plain round of any size scores about 1; a retry's catch-up
        projection is left out. The cap judges the same calibrated expectation (`draft_cap.py`). The round's
        verify forward (`tokens_verified` real tokens over `batch_rows` rows, None: one a row, in
        `verify_s`, its longest row after `context` cached tokens, `width` columns wide) corrects the cost
        curve first: its seconds less its pad slots' (`pad`) correct the real tokens' curve."""
        if self.timed is not None and verify_s is not None:
            real = tokens_verified or batch_rows
            padded = self.pad(context) * max(batch_rows * width - real, 0)
            self.timed.observe(real, max(verify_s - padded, 1e-9), context, batch_rows)
        plain_round = self.cost(batch_rows, batch_rows, context)  # seconds of a plain round's forward, these rows
        units, spent = tokens * plain_round / rows, seconds - self.catch_up_s
        foreseen = None if expected is None else expected * plain_round / rows
        gate = self.gate(rows)
        gate.record(drafted, units, spent, plain_estimate=1.0, expected=foreseen)
        if drafted:  # the widest row's window: its root and the most drafts a row kept
            judged = units if foreseen is None else foreseen * gate.calibration()
            self.cap().record(self.row_cap, judged, spent, width - 1)

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
