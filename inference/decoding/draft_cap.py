"""`DraftCap`: the most drafts one row of a cost-aware batch may keep, chosen by the rates rounds reached.

A batch's round keeps the drafts its predicted acceptances and predicted verify cost pay for
(`batch_budget.py`), and on a CPU those predictions err where the choice is close: at 4 rows on 2 Zen 4
cores a fixed budget of 2 drafts a row ran 0.98-1.13x batched `ar` in four paired runs, while the free
rule, keeping about as many drafts but up to 4-5 in one row, ran 0.89-1.08x and trailed it in 15 of 16
cells. So the widest a row may go is measured, as the gate measures whether to draft at all
(`draft_gate.py`): the cost rule still chooses which drafts each row keeps, under a cap on any one row's
count that climbs a ladder of caps by paired trials.

The cap stays for `STAY` drafting rounds, then a trial runs `TRIAL` rounds at the cap and `TRIAL` at its
neighbour on the ladder, alternating round by round (both see the same rows and contexts, so a drift in
either favours neither); the neighbour becomes the cap when its rounds committed more per second. The
next trial goes the same way after a win and the other way after a loss, so the cap moves towards the
better rate and, at the best, alternates trials below and above it. A trial upwards whose rounds never
kept more drafts in a row than the cap learns nothing (the rule did not want more) and counts as a loss.
Rates are whatever the caller records: a batch records its rounds' expected tokens (the kept drafts'
acceptances, scaled by what drafting rounds committed per expected token, as the gate judges them,
`draft_gate.py`) in plain-round units, so that rounds of a draining batch compare with a full one's. A
trial judged by the tokens its rounds happened to commit is a coin toss where neighbouring caps differ by a
few percent: in an evaluation run at 8 rows on 2 AMX Xeon cores (c25b816) both trees' caps stepped from 2
down to 1 in an early trial, and DDTree `auto` then kept one draft a row in 400 of 1,487 rounds on
MT-Bench, tau 1.58 against budget 2's 1.64 for the same verify time a round (44.7 and 44.5 ms). The
seconds stay measured, so a cap whose wider rows cost more than predicted still loses its trial.
Verification is unchanged, so every cap stays lossless.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # caps a row's drafts may climb through
START = 2  # the first cap (the best fixed budget at 4 and 8 rows on 2 CPU cores)
STAY = 32  # drafting rounds at the cap between trials
TRIAL = 12  # drafting rounds at each of the cap and its neighbour in a trial


@dataclass
class DraftCap:
    enabled: bool = True  # False: no cap (the cost rule's free choice, `draft_gate=false`)
    top: int = LADDER[-1]  # the most drafts a row can hold (the decoder's widest window less its root)
    cap: int = START
    left: int = STAY  # drafting rounds before the next trial
    rival: int | None = None  # the neighbour on trial (None: no trial running)
    upwards: bool = True  # the direction of the next trial
    turn: int = 0  # rounds of the running trial so far
    sums: dict[int, list[float]] = field(default_factory=dict)  # cap -> [tokens, seconds] of the running trial
    widest: int = 0  # the most drafts one row kept in the running trial's rounds at the rival
    moves: list[int] = field(default_factory=list)  # every cap held, in order (reported)

    def __post_init__(self) -> None:
        self.cap = min(self.cap, self.top)
        self.moves.append(self.cap)

    def ladder(self) -> list[int]:
        return sorted({c for c in LADDER if c < self.top} | {self.top})

    def current(self) -> int | None:
        """The cap of this drafting round (None: none)."""
        if not self.enabled:
            return None
        if self.rival is None:
            return self.cap
        return self.rival if self.turn % 2 == 0 else self.cap

    def record(self, cap: int | None, tokens: float, seconds: float, widest: int) -> None:
        """A finished drafting round at `cap` (`current()`): `tokens` (in any unit) in `seconds`, its widest
        row having kept `widest` drafts."""
        if not self.enabled or cap is None:
            return
        if self.rival is None:
            self.left -= 1
            if self.left <= 0:
                self._start_trial()
            return
        sums = self.sums.setdefault(cap, [0.0, 0.0])
        sums[0] += tokens
        sums[1] += seconds
        if cap == self.rival:
            self.widest = max(self.widest, widest)
        self.turn += 1
        if self.turn == 2 * TRIAL:
            self._end_trial()

    def _start_trial(self) -> None:
        caps = self.ladder()
        i = caps.index(self.cap) if self.cap in caps else 0
        if not 0 <= i + (1 if self.upwards else -1) < len(caps):
            self.upwards = not self.upwards
        j = i + (1 if self.upwards else -1)
        if not 0 <= j < len(caps):  # a ladder of one cap
            self.left = STAY
            return
        self.rival, self.turn, self.sums, self.widest = caps[j], 0, {}, 0

    def _end_trial(self) -> None:
        rival, (tokens, seconds) = self.rival, self.sums.get(self.rival, [0.0, 0.0])
        own_tokens, own_seconds = self.sums.get(self.cap, [0.0, 0.0])
        binding = rival < self.cap or self.widest > self.cap
        if binding and tokens / max(seconds, 1e-9) > own_tokens / max(own_seconds, 1e-9):
            self.cap = rival
            self.moves.append(rival)
        else:
            self.upwards = not self.upwards
        self.rival, self.left = None, STAY

    def to_dict(self) -> dict:
        return {"cap": self.cap, "moves": list(self.moves)}
