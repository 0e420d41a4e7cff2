"""What a round costs on the device that runs it: measured, never assumed.

- `VerifyCurve`: the target's forward over an n-token window after a cached prompt, timed on a grid of
  window sizes in the run's precision (`measure_verify_curve`) at two context lengths, the prompt's and
  `FAR_CONTEXT` tokens further. Between grid points it is interpolated linearly (extrapolated from the
  last two beyond them), and between the two contexts too (attention reads every cached key, so a window
  costs more as a sequence grows, and more so the wider it is: on a 2-core CPU a 16-token window over
  1,000 cached tokens costs 1.3x what it costs over 40). At each context the timings are fitted by the
  closest non-decreasing curve (a longer window that timed faster than a shorter one is timing noise,
  which would steer rounds to the larger tree; a lone slow point is pooled with its neighbours, not
  carried to every larger window). The windows are timed in turn, repeat after repeat, so that a busy
  moment lands on all of them rather than on one. On a GPU the curve is flat to ~64 tokens; on a CPU it
  depends on the precision (bf16 with bf16 instructions: nearly flat to 8; fp32: grows from 2 tokens).
- `ObservedCosts`: a curve corrected by the forwards a run actually timed (a curve measured once, with
  random prompts and in one moment, is off for the whole run): a running speed shared by every size
  (the device's drift) times a correction per forward size (what that size costs against the curve).
- `RunningMean`: the drafter's costs (a round's fixed draft cost, one expansion step of DominoTree),
  averaged over the rounds a decoder has drafted so far; the warm-up generation seeds them.

`cost-aware` drafting (`inference.decoding.budget`) reads both to choose how much a round drafts and
verifies; `domino-decode` writes the curve into settings.json and results.json.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from inference.targets.adapter import TargetModel

# every width to 8, where a CPU's curve bends, then sparser
DEFAULT_WINDOWS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64)
FAR_CONTEXT = 512  # the second context of a measured curve, this many tokens after the prompt: cost's slope in context


def non_decreasing(values: Sequence[float]) -> list[float]:
    """The non-decreasing sequence closest to `values` in squared error (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([float(v), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, c1), (m2, c2) = blocks[-2], blocks.pop()
            blocks[-1] = [(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2]
    return [m for m, c in blocks for _ in range(int(c))]


@dataclass
class VerifyCurve:
    """Seconds of a verify forward over n tokens after `prompt_tokens` cached ones, measured at `windows`
    (ascending); `far_seconds`, when measured, the same windows after `far_tokens` cached tokens. Each
    is kept non-decreasing (`non_decreasing`)."""

    windows: list[int]
    seconds: list[float]
    prompt_tokens: int  # the cached prompt length it was measured after
    far_seconds: list[float] | None = None
    far_tokens: int | None = None
    # a batch curve's seconds per pad slot (a row's column past its own window, up to the widest row's),
    # after the prompt and after far_tokens; None: not measured (a batch-1 curve has no pad)
    pad_seconds: list[float] | None = None

    def __post_init__(self) -> None:
        self.seconds = non_decreasing(self.seconds)
        if self.far_seconds is not None:
            if self.far_tokens is None or self.far_tokens <= self.prompt_tokens:
                raise ValueError(f"far_tokens must exceed prompt_tokens={self.prompt_tokens}, got {self.far_tokens}")
            self.far_seconds = non_decreasing(self.far_seconds)
        self._memo: dict[int, tuple[float, float]] = {}  # n -> (seconds at the prompt, slope per cached token)

    def __call__(self, n: int, context: int | None = None) -> float:
        """Linear interpolation between measured windows (extrapolation past the ends), then in the cached
        context (`context` tokens; None: the prompt's) between the two measured ones, never falling with it."""
        if (memo := self._memo.get(n)) is None:
            near = _interpolate(self.windows, self.seconds, n)
            slope = 0.0
            if self.far_seconds is not None:
                far = _interpolate(self.windows, self.far_seconds, n)
                slope = max(far - near, 0.0) / (self.far_tokens - self.prompt_tokens)
            memo = self._memo[n] = (near, slope)
        near, slope = memo
        if context is None:
            return near
        return max(near + slope * (context - self.prompt_tokens), 0.0)

    def pad(self, context: int | None = None) -> float:
        """Seconds one pad slot adds to a batch forward after `context` cached tokens (None: the prompt's):
        linear in the context between the two measured ones, never below 0; 0 when not measured."""
        if not self.pad_seconds:
            return 0.0
        near = self.pad_seconds[0]
        if context is None or len(self.pad_seconds) < 2 or self.far_tokens is None:
            return near
        slope = (self.pad_seconds[1] - near) / (self.far_tokens - self.prompt_tokens)
        return max(near + slope * (context - self.prompt_tokens), 0.0)

    def to_dict(self) -> dict:
        return asdict(self)


def _interpolate(xs: list[int], ys: list[float], n: int) -> float:
    if len(xs) == 1:
        return ys[0]
    i = next((j for j in range(1, len(xs)) if n <= xs[j]), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return max(y0 + (y1 - y0) * (n - x0) / (x1 - x0), 0.0)


def time_in_turn(
    run: Callable[[Any], None], reset: Callable[[], None], windows: Sequence[Any], repeats: int, device: torch.device
) -> list[float]:
    """Median seconds of `run(w)` for each window (any key `run` reads), the windows timed in turn
    `repeats` times (after two untimed passes), `reset()` after each run."""
    times: dict[Any, list[float]] = {w: [] for w in windows}
    for i in range(repeats + 2):
        for w in windows:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            run(w)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if i >= 2:
                times[w].append(time.perf_counter() - t0)
            reset()
    return [statistics.median(times[w]) for w in windows]


@torch.inference_mode()
def measure_verify_curve(
    target: TargetModel,
    prompt_tokens: int,
    windows: tuple[int, ...] | list[int] = DEFAULT_WINDOWS,
    layer_ids: list[int] | None = None,
    repeats: int = 7,
    seed: int = 0,
    far: int | None = FAR_CONTEXT,
) -> VerifyCurve:
    """Median seconds of a window forward (features of `layer_ids` captured, as verification does) after a
    cached random prompt of `prompt_tokens` tokens, for each window size (`time_in_turn`); again after
    `far` more cached tokens (None: once)."""
    g = torch.Generator().manual_seed(seed)
    vocab, device = target.config.vocab_size, target.device
    windows = sorted(set(windows))

    def timed_after(length: int) -> tuple[int, list[float]]:
        cache = target.new_cache(capacity=length + windows[-1] + 1)
        target(torch.randint(0, vocab, (1, length), generator=g).to(device), cache=cache, last_logits_only=True)
        start = target.cache_length(cache)
        inputs = {k: torch.randint(0, vocab, (1, k), generator=g).to(device) for k in windows}
        run = lambda k: target(inputs[k], cache=cache, layer_ids=layer_ids)  # noqa: E731
        return start, time_in_turn(run, lambda: target.crop_cache(cache, start), windows, repeats, device)

    start, seconds = timed_after(max(prompt_tokens, 1))
    if not far:
        return VerifyCurve(windows, seconds, start)
    far_start, far_seconds = timed_after(start + far)
    return VerifyCurve(windows, seconds, start, far_seconds, far_start)


class ObservedCosts:
    """Seconds of a verify over n tokens of `rows` rows after `context` cached tokens: the curve there,
    times the device's current speed, times the size's own correction.

    - speed: the running ratio of timed to predicted seconds over every forward, each divided by its
      size's correction first (newest weighted `weight`). It follows the device's drift, which moves
      every size at once (a shared VM's speed moved by a third within minutes, 2 Zen 4 cores).
    - correction per (rows, tokens): the mean of that size's timed seconds over curve x speed at the
      time, shrunk toward its row count's mean correction by `prior` forwards' worth (a size timed once
      is not judged by one forward); after many forwards, newest weighted at least `floor`.

    Kept apart, drift does not turn into a price of size. With one running ratio per size, a size timed
    in a slow minute and rarely after (the rule stops choosing it) stayed dear while the sizes timed
    often followed the device back: at 2 rows, 6-token rounds read 1.34-1.39x the curve against
    1.08-1.25 for 4-5 tokens, where back-to-back forwards cost the same from 2 to 6 tokens, and the rule
    trimmed rows' second drafts. The correction per row count matters to a batch: its full rounds may run
    1.2-1.4x the curve where its draining rounds run below it, and a full-batch size not timed yet
    should start from the full batch's correction, not from one over every row count."""

    def __init__(self, curve: VerifyCurve, weight: float = 0.25, prior: float = 2.0, floor: float = 0.05) -> None:
        self.curve, self.weight, self.prior, self.floor = curve, weight, prior, floor
        self.speed = 1.0  # running timed / (curve x correction) seconds, every size
        self.corrections: dict[tuple[int, int], float] = {}  # (rows, tokens) -> timed / (curve x speed)
        self.by_rows: dict[int, float] = {}  # rows -> mean correction over their forwards
        self.counts: dict[tuple[int, int], int] = {}  # forwards timed per size
        self.row_counts: dict[int, int] = {}  # forwards timed per row count
        self.observations = 0

    def correction(self, n: int, rows: int = 1) -> float:
        """What a forward of this size costs relative to the curve at the current speed."""
        return self.corrections.get((rows, n), self.by_rows.get(rows, 1.0))

    def _step(self, counts: dict, key: tuple[int, int] | int, prior: float) -> float:
        """The weight of a mean's newest value after `prior` values' worth of its start, counted in `counts`."""
        count = counts[key] = counts.get(key, 0) + 1
        return max(1.0 / (prior + count), self.floor)

    def observe(self, n: int, seconds: float, context: int | None = None, rows: int = 1) -> None:
        ratio = seconds / max(self.curve(n, context), 1e-9)
        correction = self.correction(n, rows)
        if not self.observations:
            self.speed = ratio / correction
        relative = ratio / self.speed  # against the speed the forwards before this one measured
        key = (rows, n)
        self.corrections[key] = correction + self._step(self.counts, key, self.prior) * (relative - correction)
        mean = self.by_rows.get(rows, 1.0)
        self.by_rows[rows] = mean + self._step(self.row_counts, rows, 0.0) * (relative - mean)
        self.speed += self.weight * (ratio / correction - self.speed)
        self.observations += 1

    def __call__(self, n: int, context: int | None = None, rows: int = 1) -> float:
        return self.curve(n, context) * self.speed * self.correction(n, rows)

    def to_dict(self) -> dict:
        corrections = {f"{rows} rows, {n} tokens": c for (rows, n), c in sorted(self.corrections.items())}
        by_rows = {f"{rows} rows": c for rows, c in sorted(self.by_rows.items())}
        return {"speed": self.speed, "corrections": corrections, "by_rows": by_rows, "observations": self.observations}


@dataclass
class RunningMean:
    """The mean of the values seen so far (`default` before any)."""

    total: float = 0.0
    count: int = 0

    def add(self, value: float, weight: int = 1) -> None:
        self.total += value
        self.count += weight

    def value(self, default: float = 0.0) -> float:
        return self.total / self.count if self.count else default
