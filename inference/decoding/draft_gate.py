"""`DraftGate`: whether a cost-aware round drafts at all, from the rates rounds actually reached.

A cost-aware round already verifies only the draft prefix its expected tokens pay for, but it has paid
for the draft before it knows that: a round that keeps no draft still cost a backbone forward (and, for
DominoTree, head steps). Where the measured costs say drafting does not pay (a target whose verify is
expensive, prompts the drafter does not know), every round is slower than plain decoding. The gate keeps
two running rates, tokens per second of drafting rounds and of plain rounds (one-token verifies, the
`ar` step plus the context update); when drafting falls below plain decoding, the next rounds decode
plainly, and drafting is tried again after a pause that doubles while it keeps losing (4, 8, ... 64
rounds). Verification is unchanged, so outputs stay lossless either way.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_PAUSE = 4
LONGEST_PAUSE = 64
WEIGHT = 0.25  # of the newest round in each running rate


@dataclass
class DraftGate:
    plain_rate: float | None = None  # tokens / s of plain rounds (None until one ran)
    draft_rate: float | None = None  # tokens / s of drafting rounds
    pause: int = 0  # plain rounds left before drafting is tried again
    next_pause: int = FIRST_PAUSE
    plain_rounds: int = 0  # rounds decoded plainly because drafting did not pay (reported)

    def drafting(self) -> bool:
        """Whether this round drafts."""
        if self.pause > 0:
            self.pause -= 1
            self.plain_rounds += 1
            return False
        return True

    def record(self, drafted: bool, tokens: float, seconds: float, plain_estimate: float) -> None:
        """A finished round: `tokens` (or any measure of them, e.g. the batch's plain-rate units) in
        `seconds`; `plain_estimate` = that measure per second of a plain round before one was measured."""
        rate = tokens / max(seconds, 1e-9)
        if not drafted:
            self.plain_rate = rate if self.plain_rate is None else (1 - WEIGHT) * self.plain_rate + WEIGHT * rate
            return
        self.draft_rate = rate if self.draft_rate is None else (1 - WEIGHT) * self.draft_rate + WEIGHT * rate
        plain = self.plain_rate if self.plain_rate is not None else plain_estimate
        if self.draft_rate < plain:
            self.pause, self.next_pause = self.next_pause, min(2 * self.next_pause, LONGEST_PAUSE)
        else:
            self.next_pause = FIRST_PAUSE
