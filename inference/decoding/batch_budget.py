"""`BatchBudget`: cost-aware drafting across a batch (`tree.budget=auto`, `chain.window=auto` at concurrency > 1).

A batched round runs one ragged verify forward for every live row, as wide as its widest row: a pad column
costs what a real one costs. Two choices per round, both from measured costs:

- **Which rows draft** (before drafting, per sequence): a row drafts while its drafting rounds commit more
  tokens per second of its own (its measured draft time plus its share of the round's measured verify)
  than its plain rounds do. Otherwise it decodes plainly (draft size 0) and tries
  again after a pause that doubles while drafting keeps losing: one `DraftGate` per sequence, started from
  the rates all rows measured so far (kept per decoder and concurrency, like the batch-1 decoder's gate).
- **How wide the batch verifies**: one width W for the round. Each drafting row keeps the first W - 1 of its
  best-first drafts (every prefix is a valid draft), and W maximises the batch's expected committed tokens
  per second, sum over live rows of (1 + the row's first W - 1 acceptances) / (the round's draft seconds +
  verify(B x W)). W = 1 verifies every root alone.

verify(T) is a `VerifyCurve` over the batch's total tokens T = B x W, measured with ragged forwards over a
batch of cached prompts (`measure_batch_curve`, once per decoder and concurrency). B is the rows the
forward computes: every row of the ragged cache, live or not (a draining batch pays for its empty rows), so
R live rows share a verify of B x W tokens. DominoTree's conditional scores and DDTree's marginal ones enter only
as the acceptances of their drafts (`AcceptanceModel`), so both compete under the same rule. Verification
is unchanged, so every choice stays lossless.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from inference.decoding.cost_model import DEFAULT_WINDOWS, VerifyCurve
from inference.decoding.draft_gate import DraftGate
from inference.decoding.speculative import Candidates, DecodeState, SpeculativeDecoder, Verdict, VerifyWindow
from inference.decoding.stats import GenerationStats
from inference.targets.adapter import TargetModel
from inference.targets.ragged_window import RaggedWindow


@torch.inference_mode()
def measure_batch_curve(
    target: TargetModel,
    rows: int,
    prompt_tokens: int,
    widths: list[int],
    layer_ids: list[int] | None = None,
    repeats: int = 5,
    seed: int = 0,
) -> VerifyCurve:
    """Median seconds of a ragged forward of `rows` rows x each width after cached random prompts of
    `prompt_tokens` tokens (two untimed forwards first), as a curve over total tokens (rows x width)."""
    g = torch.Generator().manual_seed(seed)
    vocab, device = target.config.vocab_size, target.device
    prompt_tokens = max(prompt_tokens, 1)
    cache = target.new_ragged_cache(rows, capacity=prompt_tokens + max(widths) + 1)
    prompts = [torch.randint(0, vocab, (prompt_tokens,), generator=g).to(device) for _ in range(rows)]
    target.prefill_ragged(prompts, cache, layer_ids=layer_ids)
    seconds = []
    for w in widths:
        window = RaggedWindow.prompts([torch.randint(0, vocab, (w,), generator=g) for _ in range(rows)], 0, device)
        times = []
        for i in range(repeats + 2):
            t0 = time.perf_counter()
            target.forward_ragged(window, cache, layer_ids=layer_ids)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if i >= 2:
                times.append(time.perf_counter() - t0)
            for r in range(rows):
                cache.crop(r, prompt_tokens)
        seconds.append(statistics.median(times))
    return VerifyCurve([rows * w for w in widths], seconds, prompt_tokens)


class BatchBudget:
    """The row rule of a cost-aware decoder in a batch (see the module doc): `draft` is per row, `settle`
    chooses the round's width over the drafted rows, `record` feeds each row's gate after the round."""

    def __init__(self, decoder: SpeculativeDecoder, concurrency: int) -> None:
        self.decoder, self.concurrency = decoder, concurrency
        self.layer_ids, self.drafter = decoder.layer_ids, decoder.drafter
        self.curve: VerifyCurve | None = decoder.batch_curves.get(concurrency)
        self.rates = decoder.batch_gates.setdefault(concurrency, DraftGate())  # every row's rounds, kept across runs

    def prepare(self, prompt_tokens: int) -> VerifyCurve:
        """The batch verify curve (measured once per decoder and concurrency, before the first round)."""
        if self.curve is None:
            widths = [w for w in DEFAULT_WINDOWS if w <= self.max_window()] or [1]
            rows = self.concurrency
            self.curve = measure_batch_curve(self.decoder.target, rows, prompt_tokens, widths, self.layer_ids)
            self.decoder.batch_curves[self.concurrency] = self.curve
        return self.curve

    def max_window(self) -> int:
        return self.decoder.max_window()

    def draft(self, state: DecodeState) -> Candidates | Any:
        """The row's full best-first draft (`Candidates`, sized by `settle`), or its plain round's empty
        draft when its gate says drafting does not pay (or nothing more can be emitted)."""
        if state.gate is None:
            state.gate = self.new_gate()
        if state.gate.drafting():
            built = self.decoder.candidates(state)
            if built is not None:
                return built
        else:
            state.stats.plain_rounds += 1
        return self.decoder.no_draft(state)

    def cost(self, tokens: int) -> float:
        """Seconds of a batch verify over `tokens` (rows x width) tokens, never 0."""
        return max(self.curve(tokens), 1e-9)

    def new_gate(self) -> DraftGate:
        """A new sequence's gate, starting from what every row's rounds measured so far at this concurrency:
        paused when drafting has been losing (a short request would otherwise spend its first rounds
        finding that out again)."""
        r = self.rates
        losing = r.draft_rate is not None and r.plain_rate is not None and r.draft_rate < r.plain_rate
        return DraftGate(r.plain_rate, r.draft_rate, pause=r.next_pause if losing else 0, next_pause=r.next_pause)

    def settle(
        self, states: dict[int, DecodeState], drafts: dict[int, Any], draft_s: float, batch_rows: int
    ) -> tuple[dict[int, Any], int]:
        """Each drafting row's kept prefix for the round's best width W (module doc); returns the drafts
        and W. `draft_s`: the seconds this round already spent drafting; `batch_rows`: the rows the forward
        runs (a ragged forward computes every row of its cache, live or not)."""
        built = {r: d for r, d in drafts.items() if isinstance(d, Candidates)}
        rows = len(drafts)
        sums = {r: [0.0] for r in built}
        for r, b in built.items():
            for gain in b.gains:
                sums[r].append(sums[r][-1] + gain)
        longest = max((len(b.gains) for b in built.values()), default=0)
        best_w, best_rate = 1, -1.0
        for w in range(1, longest + 2):
            expected = rows + sum(s[min(w - 1, len(s) - 1)] for s in sums.values())
            if (rate := expected / (draft_s + self.cost(batch_rows * w))) > best_rate:
                best_w, best_rate = w, rate
        settled = dict(drafts)
        for r, b in built.items():
            settled[r] = self.decoder.keep(states[r], b, min(best_w - 1, len(b.gains)))
        return settled, best_w

    def record(
        self,
        state: DecodeState,
        drafted: bool,
        tokens: int,
        draft_s: float,
        verify_s: float,
        rows: int,
        batch_rows: int,
    ) -> None:
        """Feed the row's gate (and the rates kept for new rows): its tokens over the seconds it took, its
        own draft plus `verify_s`, its measured share of the round's verify (the forward over its `rows`
        live rows, and its own judge and commit). Before a plain round was measured, a plain row is taken
        to cost its share of a one-token verify of `batch_rows` rows."""
        plain = 1.0 / (self.cost(batch_rows) / rows)
        state.gate.record(drafted, tokens, draft_s + verify_s, plain)
        self.rates.record(drafted, tokens, draft_s + verify_s, plain)

    def verify_window(self, state: DecodeState, draft: Any) -> VerifyWindow:
        return self.decoder.verify_window(state, draft)

    def judge(self, state: DecodeState, draft: Any, logits: torch.Tensor, features: torch.Tensor | None) -> Verdict:
        return self.decoder.judge(state, draft, logits, features)

    def commit(
        self, state: DecodeState, verdict: Verdict, tokens: list[int], stats: GenerationStats
    ) -> tuple[bool, bool]:
        return self.decoder.commit(state, verdict, tokens, stats)
