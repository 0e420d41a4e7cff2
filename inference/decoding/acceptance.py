"""How likely verification is to accept a draft, from the drafter's own path score: a calibrated map.

A drafter's probabilities are not acceptance probabilities: a path of log-probability s is accepted when
the target's choices follow it, which depends on how well the drafter is trained, on the target, the
data and the precision. `AcceptanceModel` is a monotone map from a path score (the log-probability of
the root-to-node path, as the tree builders and the chain rollout compute it) to the probability that
the target accepts the whole path, estimated from the rounds already verified: a running estimate,
chosen over a fit on held-out rows stored with the drafter because it measures exactly what the run
decodes (its prompts, its target, its precision), needs no extra step or file, and adapts within a few
rounds; before any round it is the drafter's own probability exp(s).

Scores fall into bins (edges in `EDGES`); each bin holds its accepted and seen counts plus `prior`
pseudo-observations at exp(bin centre), and the map is made non-increasing in score by pooling adjacent
violators, so that a deeper or less likely path is never predicted to be accepted more often.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# Bin edges over the path log-probability, best first: (-0.1, 0], (-0.25, -0.1], ..., (-inf, -8].
EDGES = (0.0, -0.1, -0.25, -0.5, -0.75, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0, -8.0, -math.inf)


class AcceptanceModel:
    """Running, monotone calibration of path scores to acceptance probabilities (module docstring)."""

    def __init__(self, prior: float = 2.0) -> None:
        centres = [(hi + max(lo, hi - 4.0)) / 2 for hi, lo in zip(EDGES, EDGES[1:], strict=False)]
        self.accepted = [prior * math.exp(c) for c in centres]
        self.seen = [prior] * len(centres)
        self._table: list[float] | None = None

    @staticmethod
    def _bin(score: float) -> int:
        for i, lo in enumerate(EDGES[1:]):
            if score > lo:
                return i
        return len(EDGES) - 2

    def update(self, scores: Iterable[float], accepted: Iterable[bool]) -> None:
        """Record one round: each drafted path's score and whether verification accepted it."""
        for score, ok in zip(scores, accepted, strict=True):
            b = self._bin(score)
            self.seen[b] += 1
            self.accepted[b] += bool(ok)
        self._table = None

    def _monotone(self) -> list[float]:
        """Per-bin rates, pooled where a worse bin would beat a better one (pool adjacent violators)."""
        blocks: list[list[float]] = []  # [accepted, seen, bins]
        for a, n in zip(self.accepted, self.seen, strict=True):
            blocks.append([a, n, 1])
            while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
                a2, n2, k2 = blocks.pop()
                blocks[-1] = [blocks[-1][0] + a2, blocks[-1][1] + n2, blocks[-1][2] + k2]
        return [a / n for a, n, k in blocks for _ in range(int(k))]

    def predict(self, scores: Iterable[float]) -> list[float]:
        """Acceptance probability of each path score."""
        if self._table is None:
            self._table = self._monotone()
        return [self._table[self._bin(s)] for s in scores]

    def to_dict(self) -> dict:
        """Per bin: its upper edge, the predicted probability and the rounds' own observations."""
        table = self._monotone()
        return {
            "upper_edges": list(EDGES[:-1]),
            "probability": table,
            "seen": self.seen,
            "accepted": self.accepted,
        }
