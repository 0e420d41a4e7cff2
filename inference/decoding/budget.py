"""How much a round drafts and verifies: the prefix that maximises expected tokens per second.

A tree built best-first lists its nodes in decreasing path probability, and a chain's drafts in
decreasing prefix probability, so the first n of them are always a valid draft (a parent comes before
its children). Verification commits 1 + (the number of accepted nodes) tokens, so the expected tokens of
a round that keeps the first n is 1 + sum of the n nodes' acceptance probabilities
(`inference.decoding.acceptance`); its cost is the drafting it needs plus a verify over n + 1 tokens
(`inference.decoding.cost_model`). `best_prefix` picks the n with the most expected tokens per second.
Verification itself is unchanged, so every choice stays lossless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

AUTO = "auto"


def best_prefix(gains: Sequence[float], cost: Callable[[int], float], minimum: int = 1) -> int:
    """The n in [minimum, len(gains)] that maximises (1 + sum(gains[:n])) / cost(n); the smaller n on ties.

    `cost(n)` is the seconds of a round that keeps n drafts (its verify window is n + 1)."""
    minimum = min(minimum, len(gains))
    best_n, best_rate, expected = minimum, -1.0, 1.0
    for n in range(len(gains) + 1):
        if n:
            expected += gains[n - 1]
        if n >= minimum and (rate := expected / max(cost(n), 1e-12)) > best_rate:
            best_n, best_rate = n, rate
    return best_n
