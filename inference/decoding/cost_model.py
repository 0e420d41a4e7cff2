"""What a round costs on the device that runs it: measured, never assumed.

- `VerifyCurve`: the target's forward over an n-token window after a cached prompt, timed on a grid of
  window sizes in the run's precision (`measure_verify_curve`) and interpolated linearly between grid
  points (extrapolated from the last two beyond them) and never falling: a longer window that timed faster
  than a shorter one is timing noise, which would steer rounds to the larger tree. On a GPU it is flat to
  ~64 tokens; on a CPU it depends on the precision (bf16 with bf16 instructions: nearly flat to 16; fp32:
  grows from 2 tokens).
- `ObservedCosts`: a curve corrected by the forwards a run actually timed (a batched run's verify: its
  contexts are longer than the curve's prompt, and a curve measured once, in a busy moment, is off for
  the whole run).
- `RunningMean`: the drafter's costs (a round's fixed draft cost, one expansion step of DominoTree),
  averaged over the rounds a decoder has drafted so far; the warm-up generation seeds them.

`cost-aware` drafting (`inference.decoding.budget`) reads both to choose how much a round drafts and
verifies; `domino-decode` writes the curve into settings.json and results.json.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import asdict, dataclass

import torch

from inference.targets.adapter import TargetModel

DEFAULT_WINDOWS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


@dataclass
class VerifyCurve:
    """Seconds of a verify forward over n tokens, measured at `windows` (ascending); `seconds` is kept
    non-decreasing (each point at least the largest before it)."""

    windows: list[int]
    seconds: list[float]
    prompt_tokens: int  # the cached prompt length it was measured after

    def __post_init__(self) -> None:
        self.seconds = list(itertools.accumulate(self.seconds, max))
        self._memo: dict[int, float] = {}  # window -> seconds: a tree round asks for the same few windows many times

    def __call__(self, n: int) -> float:
        """Linear interpolation between measured windows; linear extrapolation past the ends."""
        if (cost := self._memo.get(n)) is not None:
            return cost
        xs, ys = self.windows, self.seconds
        if len(xs) == 1:
            return ys[0]
        i = next((j for j in range(1, len(xs)) if n <= xs[j]), len(xs) - 1)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        cost = self._memo[n] = max(y0 + (y1 - y0) * (n - x0) / (x1 - x0), 0.0)
        return cost

    def to_dict(self) -> dict:
        return asdict(self)


@torch.inference_mode()
def measure_verify_curve(
    target: TargetModel,
    prompt_tokens: int,
    windows: tuple[int, ...] | list[int] = DEFAULT_WINDOWS,
    layer_ids: list[int] | None = None,
    repeats: int = 7,
    seed: int = 0,
) -> VerifyCurve:
    """Median seconds of a window forward (features of `layer_ids` captured, as verification does) after a
    cached random prompt of `prompt_tokens` tokens, for each window size; two untimed forwards first."""
    g = torch.Generator().manual_seed(seed)
    vocab = target.config.vocab_size
    prompt = torch.randint(0, vocab, (1, max(prompt_tokens, 1)), generator=g).to(target.device)
    cache = target.new_cache()
    target(prompt, cache=cache, last_logits_only=True)
    start = target.cache_length(cache)
    seconds = []
    windows = sorted(set(windows))
    for k in windows:
        window = torch.randint(0, vocab, (1, k), generator=g).to(target.device)
        times = []
        for i in range(repeats + 2):
            if target.device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            target(window, cache=cache, layer_ids=layer_ids)
            if target.device.type == "cuda":
                torch.cuda.synchronize()
            if i >= 2:
                times.append(time.perf_counter() - t0)
            target.crop_cache(cache, start)
        seconds.append(statistics.median(times))
    return VerifyCurve(list(windows), seconds, start)


class ObservedCosts:
    """Seconds of a verify over n tokens: the running mean of the forwards timed at n during the run
    (newest weighted `weight`), else the curve scaled by the running ratio of timed to predicted seconds.

    A rule that chose a width on a curve that was too cheap there pays for it once or twice, then sees
    the width's timed cost; widths never run are predicted from the curve's shape at the timed scale."""

    def __init__(self, curve: VerifyCurve, weight: float = 0.25) -> None:
        self.curve, self.weight = curve, weight
        self.seen: dict[int, float] = {}  # tokens -> running seconds
        self.ratio = 1.0  # running timed / curve seconds
        self.observations = 0

    def observe(self, n: int, seconds: float) -> None:
        w = self.weight if self.observations else 1.0
        previous = self.seen.get(n)
        self.seen[n] = seconds if previous is None else (1 - self.weight) * previous + self.weight * seconds
        self.ratio = (1 - w) * self.ratio + w * seconds / max(self.curve(n), 1e-9)
        self.observations += 1

    def __call__(self, n: int) -> float:
        seen = self.seen.get(n)
        return seen if seen is not None else self.curve(n) * self.ratio

    def to_dict(self) -> dict:
        return {"timed_s": dict(sorted(self.seen.items())), "ratio": self.ratio, "observations": self.observations}


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
