"""How much a round drafts and verifies: the prefix that maximises expected tokens per second.

A tree built best-first lists its nodes in decreasing path probability, and a chain's drafts in
decreasing prefix probability, so the first n of them are always a valid draft (a parent comes before
its children). Verification commits 1 + (the number of accepted nodes) tokens, so the expected tokens of
a round that keeps the first n is 1 + sum of the n nodes' acceptance probabilities
(`inference.decoding.acceptance`); its cost is the drafting it needs plus a verify over n + 1 tokens
(`inference.decoding.cost_model`). `best_prefix` picks the n with the most expected tokens per second.
Verification itself is unchanged, so every choice stays lossless.

A best-first builder need not build the whole `max_budget` tree to find that prefix: `prefix_settled`
says when the nodes built so far already contain it (every node still to come scores at most the best
candidate left, so it gains at most that candidate's acceptance), and DominoTree, whose every node
expansion is a head step, stops there.
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


def prefix_settled(
    gains: Sequence[float],
    next_gain: float,
    limit: int,
    cost_at_most: Callable[[int], float],
    cost_at_least: Callable[[int], float],
) -> bool:
    """Whether no longer draft can beat the best prefix of `gains`, so that `best_prefix` over any
    extension (up to `limit` drafts) would choose a prefix of these.

    `gains`: the acceptance of the drafts so far, in best-first order; every further draft gains at most
    `next_gain`. A prefix of k drafts costs at most `cost_at_most(k)` and one of m drafts at least
    `cost_at_least(m)` (e.g. the verify alone). The check compares the best rate the first n surely reach
    with the best rate any m > n could reach; when it holds, the choice is the one the full tree gives.
    """
    n = len(gains)
    if n >= limit:
        return True
    expected, surely = 1.0, 0.0
    for k, gain in enumerate(gains, 1):
        expected += gain
        surely = max(surely, expected / max(cost_at_most(k), 1e-12))
    return all(
        (expected + (m - n) * next_gain) / max(cost_at_least(m), 1e-12) <= surely for m in range(n + 1, limit + 1)
    )
