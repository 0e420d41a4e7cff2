"""`BatchedDecoder`: several prompts decoded together, ONE target forward per round for all of them.

Each row of the batch is one sequence with everything a batch-1 generation keeps: its own draft cache
(`drafter.new_cache(1, ...)`), root, tokens, stats, token budget and generator (a `DecodeState`). Its
drafting, window, judging and commit are those of the batch-1 decoder it wraps (`batched_rules.py`), so at
a fixed window / budget every row emits exactly the tokens, and verifies the windows, of
`decoder.generate` on its prompt alone (up to the rounding of the batched forwards, which on the tiny
fp32 targets of the tests never moves a choice). A cost-aware decoder (`auto`) sizes its drafts across
the batch instead (`batch_budget.py`): each row's draft is a prefix of its full draft, and its output
stays its batch-1 `ar` output. The rows share their drafting and the target's verify. Drafting:
`draft_blocks` runs every drafting row's block in one backbone forward over its own draft cache, then
what the decoder can do for all rows at once (one lm_head product; a greedy chain's head steps; DDTree's
top-k; DominoTree's tree builds, whose head steps expand every row's next nodes together), each row's
share left in its `DecodeState`. Verify: the rows' windows stacked (`RaggedWindow.stack`) and run in one
`target.forward_ragged` on a `RaggedKVCache`; each row judges its own logits. A row's `DecodeState` holds
a `RowCache` (its row of the ragged cache), so the decoder's own `commit` crops or compacts that row.

Continuous batching: a finished row (stop token or token budget) is reset and refilled with the next waiting
prompt before the next round; the refills are prefilled in `target.prefill_ragged` calls that compute only
their rows (rows finish at different rounds under speculation, and a refill that ran every row of the
batch cost a whole batch's prefill per finished sequence), grouped so that padding stays small
(`prefill_groups`: a ragged prefill computes every row as wide as its longest prompt, and prompts of 40
and 600 tokens prefilled together cost two 600-token prompts). Once nothing waits, the batch
shrinks: the last live rows move into the freed rows (`RaggedKVCache.move`, one row's entries once) and
the forwards run the live rows alone, on views of the cache's first rows. Speculative rows end rounds
apart, and a drain that kept computing the empty rows charged them what batched `ar`, whose rows of equal
limits end together, never pays. The run ends when every prompt is done; the results come back in input
order.

Round costs: the rows' shared drafting, per active row what is left of its draft (a sampled chain's
head steps, a tree's best-first bookkeeping) and its judge / commit; then one ragged target forward over
the live rows, of width
W = the widest window this round, over a span of max(row length) + W: its real tokens run packed, and
only attention and the cache writes pay for the pad columns. Prefills of refills add one ragged forward
over the refilled rows, as wide as the longest refill prompt. Needs the target's lean engine
(`forward_ragged`).

The lossless check: given each prompt's reference output (its batch-1 `ar` tokens, greedy), a row compares
what it commits with the reference and, at the first token that differs, keeps the logits row that chose
it with the forward's shape (`LogitsProbe`: the row's window width, the forward's rows, padded width, real
tokens and key span):
`Generation.probe`. A batched run cannot be replayed at batch 1 (its forwards have other shapes, so they
round otherwise), and this costs nothing where the outputs agree. `follow` runs batched `ar` teacher-forced
along given outputs, in the rounds and shapes of batched `ar` on those prompts: the check's measure of how
far batching alone moves a row's logits.

Stats: `accept_lengths`, `draft_sizes`, `plain_rounds`, `own_argmax_violations`, the tree walk's step
counters and token counts are filled as batch 1 fills them. Times are wall times of the shared loop
(`round_s`: each round's, the same for every row in it):
`draft_s` / `commit_s` are the row's own (plus an equal share of the shared backbone), `verify_s` the
shared forwards it waited for, `prefill_s` the
prefill forward that started it, `decode_s` from its first token to its end. `BatchedDecoder.prefill_s`:
the last run's seconds in prefills, which the rounds waited for (the run's decode seconds are the rest).
`predicted` may differ from batch 1's (the decoder's acceptance model learns from the rows in batch
order); it chooses nothing at a fixed window/budget, and the draft sizes of a cost-aware batch.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from inference.decoding.ar import ARDecoder
from inference.decoding.batch_budget import BatchBudget
from inference.decoding.batched_rules import ARRule, row_rule
from inference.decoding.generation import Generation
from inference.decoding.logits_probe import LogitsProbe
from inference.decoding.sampling import sample
from inference.decoding.speculative import Candidates, DecodeState, SpeculativeDecoder, VerifyWindow
from inference.decoding.stats import GenerationStats
from inference.targets.ragged_cache import RaggedKVCache, RowCache
from inference.targets.ragged_window import RaggedWindow

PREFILL_SLACK = 1.25  # a prefill group's padded tokens may exceed its real ones by this factor ...
PREFILL_ROOM = 64  # ... plus this many tokens (a forward's fixed cost is worth tens of prompt tokens)


def prefill_groups(lengths: dict[int, int]) -> list[list[int]]:
    """The rows of one refill (row -> prompt length) in prefill groups: longest first, a row joins the
    current group while the group's padded tokens (rows x its longest prompt) stay within
    PREFILL_SLACK x its real tokens + PREFILL_ROOM; each group is one ragged forward."""
    groups: list[list[int]] = []
    real = 0
    for r in sorted(lengths, key=lambda r: (-lengths[r], r)):
        if (
            groups
            and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= PREFILL_SLACK * (real + lengths[r]) + PREFILL_ROOM
        ):
            groups[-1].append(r)
            real += lengths[r]
        else:
            groups.append([r])
            real = lengths[r]
    return groups


@dataclass
class _Job:
    """One prompt: its ids, budget, generator and (once started) its output."""

    index: int
    ids: torch.Tensor  # [T] long
    budget: int  # tokens it may emit (max_new_tokens capped by the context)
    generator: torch.Generator | None
    tokens: list[int] = field(default_factory=list)
    stats: GenerationStats | None = None
    reason: str = "length"
    first: float = 0.0  # clock time of its first token (decode_s starts there)
    reference: list[int] | None = None  # the lossless check's expected output (module doc)
    probe: LogitsProbe | None = None  # the logits at its first token that differs from `reference`
    forced: bool = False  # commit `reference`'s tokens, not its own (`BatchedDecoder.follow`)


@dataclass
class _Row:
    """A live row: the job it decodes and the batch-1 decode state of that job."""

    job: _Job
    state: DecodeState


class BatchedDecoder:
    """Decode many prompts with up to `concurrency` of them in one ragged batch (see the module doc).

    `decoder` is a decoder from `build_decoder` (`ar`, a chain or a tree at a fixed window / budget) on a
    target with the lean engine; its per-sequence behaviour is kept exactly. `calibrate=False`: a
    cost-aware decoder sizes drafts on its batch verify curve as given (`batch_budget.py`)."""

    def __init__(self, decoder: ARDecoder | SpeculativeDecoder, concurrency: int, calibrate: bool = True) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 sequence, got {concurrency}")
        self.decoder, self.concurrency = decoder, concurrency
        self.rule = row_rule(decoder, concurrency, calibrate)
        self.prefill_s = 0.0  # the last run's seconds in prefills (their forwards and each refill's start)
        self.target = decoder.target
        if self.target.lean is None:
            raise ValueError(f"batched decoding needs the lean engine; target {self.target.name} runs on engine=hf")
        self.pad_id = 0  # any id: the ragged forward hides pad columns from real tokens

    @torch.inference_mode()
    def prepare(self, prompts: Sequence[list[int] | torch.Tensor]) -> None:
        """Measure what the row rule needs before its first round (a cost-aware rule's batch verify curve,
        at the prompts' median length; once per decoder and concurrency, a no-op after). `generate` calls
        it; a caller that times `generate` calls it first, since measuring is not decoding."""
        if isinstance(self.rule, BatchBudget) and prompts:
            lengths = [self.decoder.prompt_tensor(p).shape[-1] for p in prompts]
            self.rule.prepare(int(statistics.median(lengths)))

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[list[int] | torch.Tensor],
        max_new_tokens: int | Sequence[int],
        generators: Sequence[torch.Generator | None] | None = None,
        references: Sequence[list[int] | None] | None = None,
    ) -> list[Generation]:
        """One `Generation` per prompt, in input order, each what `decoder.generate(prompt, max_new_tokens,
        generator)` returns alone (`max_new_tokens` and `generators` per prompt or one for all).
        `references`: each prompt's expected output (None: none), for the lossless check (module doc)."""
        n = len(prompts)
        limits = [max_new_tokens] * n if isinstance(max_new_tokens, int) else list(max_new_tokens)
        gens = [None] * n if generators is None else list(generators)
        expected = [None] * n if references is None else list(references)
        if len(limits) != n or len(gens) != n or len(expected) != n:
            raise ValueError(
                f"{n} prompts but {len(limits)} max_new_tokens, {len(gens)} generators and {len(expected)} references"
            )
        jobs = []
        for i, (prompt, limit, gen) in enumerate(zip(prompts, limits, gens, strict=True)):
            ids = self.decoder.prompt_tensor(prompt)[0]
            jobs.append(_Job(i, ids, self.decoder.token_budget(ids.numel(), limit), gen, reference=expected[i]))
        return self._run(jobs)

    @torch.inference_mode()
    def follow(
        self,
        prompts: Sequence[list[int] | torch.Tensor],
        outputs: Sequence[list[int]],
        probes: Sequence[LogitsProbe | None],
    ) -> None:
        """Batched `ar` teacher-forced along given outputs: row i commits `outputs[i]`'s tokens, one a round,
        whatever its logits say, in the rounds and batch shapes in which batched `ar` decodes prompts whose
        outputs these are; `probes[i]` (or None) observes the logits rows of prompt i's output positions.
        The lossless check's measure of how far batched forwards alone move a sequence's logits
        (`inference.eval.divergence`): along `ar`'s own output the rows round as a batch rounds them."""
        if not isinstance(self.rule, ARRule):
            raise ValueError(f"follow replays batched ar, not {type(self.decoder).__name__}: pass the ar decoder")
        if not len(prompts) == len(outputs) == len(probes):
            raise ValueError(f"{len(prompts)} prompts but {len(outputs)} outputs and {len(probes)} probes")
        jobs = []
        for i, (prompt, output, probe) in enumerate(zip(prompts, outputs, probes, strict=True)):
            ids = self.decoder.prompt_tensor(prompt)[0]
            if not output or self.decoder.token_budget(ids.numel(), len(output)) != len(output):
                raise ValueError(f"output {i} has {len(output)} tokens: follow needs 1 to the context's room")
            jobs.append(_Job(i, ids, len(output), None, reference=list(output), probe=probe, forced=True))
        self._run(jobs)

    def _run(self, jobs: list[_Job]) -> list[Generation]:
        """Decode `jobs` in continuous batches of `concurrency` rows (module doc)."""
        if not jobs:
            return []
        self.prepare([job.ids for job in jobs])
        self.prefill_s = 0.0
        rows = min(self.concurrency, len(jobs))
        longest = max(job.ids.numel() + job.budget for job in jobs)
        widest = max(self.rule.max_window(), max(job.ids.numel() for job in jobs))
        cache = self.target.new_ragged_cache(rows, capacity=longest + widest + 1)
        live: list[_Row | None] = [None] * rows
        waiting = list(reversed(jobs))  # popped from the end: input order
        while True:
            self._refill(cache, live, waiting)
            rows = self._pack(cache, live)
            if rows == 0:
                break
            self._round(cache, live, rows)
        return [
            Generation(tokens=job.tokens, finish_reason=job.reason, stats=job.stats, probe=job.probe)  # type: ignore[arg-type]
            for job in jobs
        ]

    def _refill(self, cache: RaggedKVCache, live: list[_Row | None], waiting: list[_Job]) -> None:
        """Start waiting jobs on the free rows (one ragged prefill per group of similar lengths,
        `prefill_groups`) until every row is busy or nothing waits; a job that ends on its first token
        (stop token, budget 1) frees its row at once."""
        clock, rule = self.decoder.clock, self.rule
        while waiting and any(row is None for row in live):
            starts: dict[int, _Job] = {}
            for r, row in enumerate(live):
                if row is None and waiting:
                    starts[r] = waiting.pop()
                    cache.reset(r)
            for group in prefill_groups({r: job.ids.numel() for r, job in starts.items()}):
                t0 = clock.now()
                prompts = [starts[r].ids if r in group else None for r in range(len(live))]
                out = self.target.prefill_ragged(prompts, cache, layer_ids=rule.layer_ids)
                width = starts[group[0]].ids.numel()  # the group's longest prompt
                real = sum(starts[r].ids.numel() for r in group)
                for r in group:
                    logits = out.logits[r, 0]
                    live[r] = self._start(cache, r, starts[r], logits, out.features, t0, (len(group), width, real))
                self.prefill_s += clock.now() - t0

    def _start(
        self,
        cache: RaggedKVCache,
        r: int,
        job: _Job,
        logits: torch.Tensor,
        features: torch.Tensor | None,
        t0: float,
        shape: tuple[int, int, int],
    ) -> _Row | None:
        """Sample the job's first token from its prompt's last logits (of a prefill of `shape` = (fresh
        rows, columns, real tokens)) and build its decode state (None: the job is already done)."""
        decoder, clock = self.decoder, self.decoder.clock
        prompt_len = job.ids.numel()
        job.stats = stats = GenerationStats(prompt_tokens=prompt_len)
        root = sample(logits.unsqueeze(0), decoder.sampling, job.generator)
        if job.forced:
            root = torch.tensor(job.reference[:1], dtype=torch.long, device=root.device)
        job.tokens = [root.item()]
        rows, width, real = shape
        self._watch(job, 0, logits.unsqueeze(0), [prompt_len - 1], prompt_len, rows, width, width, real)
        job.reason = "stop" if job.tokens[0] in decoder.stop_token_ids else "length"
        if job.reason == "stop" or job.budget == 1:
            stats.prefill_s = clock.now() - t0
            stats.output_tokens = 1
            return None
        draft_cache = None
        drafter = self.rule.drafter
        if drafter is not None:
            draft_cache = drafter.new_cache(1, capacity=prompt_len + job.budget + drafter.config.block_size)
            # projected now, not by the batch's next draft: the gate times that draft, and the prompt's
            # one-time cost would count against drafting's rate
            drafter.append_context(draft_cache, features[r : r + 1, :prompt_len])
        state = DecodeState(RowCache(cache, r), draft_cache, root, prompt_len, job.budget - 1, job.generator, stats)
        job.first = clock.now()
        stats.prefill_s = job.first - t0
        return _Row(job, state)

    @staticmethod
    def _pack(cache: RaggedKVCache, live: list[_Row | None]) -> int:
        """Move the last live rows into the free rows before them (`RaggedKVCache.move`), so that the live
        rows come first, and return how many there are. Only a draining batch has free rows after a
        refill: its forwards then run its live rows alone instead of paying for the empty ones."""
        end = len(live)
        for r in range(len(live)):
            while end > r and live[end - 1] is None:
                end -= 1
            if r >= end:
                return r
            if live[r] is None:
                end -= 1
                cache.move(end, r)
                live[r], live[end] = live[end], None
                live[r].state.target_cache.row = r
        return end

    def _round(self, cache: RaggedKVCache, live: list[_Row | None], rows: int) -> None:
        """One round over the `rows` live rows, which are the cache's first (`_pack`): every row drafts and
        gives its window, one ragged forward over those rows, every row judges and commits; finished rows
        are freed."""
        clock, rule = self.decoder.clock, self.rule
        budget = rule if isinstance(rule, BatchBudget) else None
        start = clock.now()
        if budget is not None:
            budget.start_round(rows)
        drafts: dict[int, object] = {}
        windows: list[VerifyWindow | None] = [None] * rows
        active = {r: row.state for r, row in enumerate(live[:rows])}
        t0 = clock.now()
        rule.draft_blocks(list(active.values()))  # every row's backbone in one forward
        share = (clock.now() - t0) / len(active)
        spent = dict.fromkeys(active, share)  # each row's draft seconds this round
        for r, state in active.items():
            if state.block is not None:
                parts = state.stats.draft_parts_s
                parts["backbone"] = parts.get("backbone", 0.0) + share
            t0 = clock.now()
            drafts[r] = rule.draft(state)
            spent[r] += clock.now() - t0
            state.block = state.drafted = None  # what no draft read must not reach the next round
        drafted = any(isinstance(d, Candidates) for d in drafts.values())
        context = int(cache.lengths[:rows].max())  # the key slots every row's queries attend over, before the window
        if budget is not None:  # the round's width across the batch, then each row's kept prefix
            t0 = clock.now()
            states = {r: live[r].state for r in drafts}
            drafts, _ = budget.settle(states, drafts, sum(spent.values()), rows, context)
            share = (clock.now() - t0) / len(drafts)
            spent = {r: s + share for r, s in spent.items()}
        for r, draft in drafts.items():
            t0 = clock.now()
            windows[r] = rule.verify_window(live[r].state, draft)
            live[r].job.stats.draft_s += spent[r] + clock.now() - t0
        t1 = clock.now()
        batch = RaggedWindow.stack(windows, self.pad_id, cache.keys.device)
        out = self.target.forward_ragged(batch, cache, layer_ids=rule.layer_ids, rows=rows)
        forward_s = clock.now() - t1
        span = context + batch.width  # the key slots the forward's queries attended over
        real = sum(w.ids.shape[1] for w in windows if w is not None)  # the forward's packed tokens
        committed = 0  # tokens every row committed this round
        row_stats = [row.job.stats for row in live[:rows]]
        for r, row in enumerate(live[:rows]):
            job, state = row.job, row.state
            t2 = clock.now()
            n = windows[r].ids.shape[1]
            features = None if out.features is None else out.features[r : r + 1, :n]
            verdict = rule.judge(state, drafts[r], out.logits[r, :n], features)
            if job.forced:
                verdict.tokens = job.reference[len(job.tokens) : len(job.tokens) + 1]
            t3 = clock.now()
            emitted = len(job.tokens)
            finished, stopped = rule.commit(state, verdict, job.tokens, job.stats)
            t4 = clock.now()
            watching = job.reference is not None and (job.forced or job.probe is None)
            if watching and (chose := verdict.rows()) is not None:
                keep = list(range(chose.shape[0])) if verdict.keep is None else verdict.keep.tolist()
                self._watch(job, emitted, chose, keep, n, rows, batch.width, span, real)
            committed += job.stats.accept_lengths[-1]
            job.stats.verify_s += forward_s + t3 - t2  # the shared forward, then this row's acceptance rule
            job.stats.commit_s += t4 - t3
            if finished:
                job.reason = "stop" if stopped else job.reason
                job.stats.decode_s = t4 - job.first
                job.stats.output_tokens = len(job.tokens)
                cache.reset(r)
                live[r] = None
        seconds = clock.now() - start
        for stats in row_stats:
            stats.round_s.append(seconds)
        if budget is not None:
            verify_s = forward_s if clock.exact else None  # unsynchronised, it timed the launches only
            expected = sum(stats.predicted[-1] for stats in row_stats)
            budget.end_round(drafted, committed, seconds, rows, rows, real, verify_s, context, batch.width, expected)

    @staticmethod
    def _watch(
        job: _Job,
        first: int,
        rows: torch.Tensor,
        window_rows: list[int],
        width: int,
        batch_rows: int,
        columns: int,
        span: int,
        tokens: int | None = None,
    ) -> None:
        """The lossless check's capture (module doc): where the tokens the job just committed from
        first on (chosen by `rows`, rows `window_rows` of a `width`-token window in a `batch_rows` x
        `columns` forward of `tokens` real tokens whose queries attended over `span` cache slots) first differ from its
        reference, keep that logits row once. A forced job's probe observes every row instead."""
        if job.forced:
            if job.probe is not None:
                job.probe.observe(first, rows, width, window_rows)
            return
        if job.reference is None or job.probe is not None:
            return
        for q in range(first, len(job.tokens)):
            if q >= len(job.reference):
                return  # the reference ended first: nothing to compare logits with
            if job.tokens[q] != job.reference[q]:
                job.probe = LogitsProbe(
                    q, batch_rows=batch_rows, batch_width=columns, batch_span=span, batch_tokens=tokens
                )
                job.probe.observe(first, rows, width, window_rows)
                return
