"""`DraftGate`: whether a cost-aware round drafts at all, from the rates rounds actually reached.

A cost-aware round already verifies only the draft prefix its expected tokens pay for, but it has paid
for the draft before it knows that: a round that keeps no draft still cost a backbone forward (and, for
DominoTree, head steps). Where the measured costs say drafting does not pay (a target whose verify is
expensive, prompts the drafter does not know), every round is slower than plain decoding. The gate keeps
two running rates, tokens per second of drafting rounds and of plain rounds (one-token verifies, the
`ar` step plus the context update); when drafting falls below plain decoding, the next rounds decode
plainly, and drafting is tried again after a pause that doubles while it keeps losing (4, 8, ... 64
rounds). Verification is unchanged, so outputs stay lossless either way.

A retry is judged on its own rounds: the first `PROBE_ROUNDS` drafting rounds after a pause (and the very
first ones) are measured together and replace the drafting rate. Averaged into a rate from before the
pause, one winning retry moved it a quarter of the way, so a bad start kept the gate shut through pause
after doubled pause (DDTree at concurrency 4 once ran 0.95x batched `ar`, where a fixed budget of 2 ran
1.14x). The retry's first draft also projects the context every plain round committed meanwhile
(`DraftKVCache.pending`): a one-time debt, not a cost of drafting from now on, which callers time apart
and leave out of the seconds they record (`reopening`).

A drafting round is judged by the tokens it was expected to commit (`expected`: the root plus the
acceptance model's sum over the drafts it kept), scaled by the tokens drafting rounds committed per
expected one so far (shrunk toward 1 by `CALIBRATION_ROUNDS` rounds' worth), not by the tokens it
happened to commit: which drafts a round accepts is a coin toss per draft. In simulated rounds of budget
2 at 4 rows (`benchmarks/gate_noise.py`; a probe of 2 rounds reads its committed tokens to +-17 %, one
sd), where drafting gains 4-15 % over plain rounds a gate judging what rounds happened to commit shut on
unlucky probes and kept 16-58 % of rounds plain, one judging their expectation 0-23 % (at 4 rows on 2
Zen 4 cores the gate kept 28-77 % of rounds plain where budget 2 gained 0-8 %). The seconds stay
measured, so whatever the cost model misses still counts, and the running ratio keeps a biased
acceptance model from steering the gate.

A losing retry also bounds what retrying costs: the seconds its rounds took beyond what plain rounds
would have taken for their tokens are at most `probe_share` of the plain decoding before the next retry,
so the pause lasts at least that long whatever its round count. Where drafting loses by much (a batch of
many rows on a few CPU cores) a retry is dear and comes back rarely; a retry that barely lost costs little
and comes back after the round pause as before. Replayed on the rounds of 40 validation prompts decoded at
batch 1 with the gate off, drafting's seconds scaled by 1 to 3 (`benchmarks/gate_replay.py`), the gate
kept 95.5-103.7 % of the better of always drafting and plain decoding, the round pause alone 93.2-103.6 %.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_PAUSE = 4
LONGEST_PAUSE = 64
WEIGHT = 0.25  # of the newest round in each running rate
PROBE_ROUNDS = 2  # drafting rounds measured together after a pause, before drafting is judged again
PROBE_SHARE = 0.05  # a losing retry's lost seconds, as a share of the plain decoding before the next retry
CALIBRATION_ROUNDS = 16  # drafting rounds' worth of the prior (1) in the ratio of committed to expected tokens


@dataclass
class DraftGate:
    enabled: bool = True  # False: every round drafts (`draft_gate=false`, e.g. to record what drafting alone does)
    probe_share: float | None = PROBE_SHARE  # None: a pause is its round count alone
    plain_rate: float | None = None  # tokens / s of plain rounds (None until one ran)
    draft_rate: float | None = None  # tokens / s of drafting rounds
    pause: int = 0  # plain rounds left before drafting is tried again
    next_pause: int = FIRST_PAUSE
    plain_rounds: int = 0  # rounds decoded plainly because drafting did not pay (reported)
    probe_left: int = PROBE_ROUNDS  # drafting rounds of the current probe still to measure
    probe_tokens: float = 0.0
    probe_seconds: float = 0.0
    owed: float = 0.0  # seconds of plain rounds still to run before a retry (PROBE_SHARE)
    committed_sum: float = 0.0  # tokens committed by the drafting rounds that gave an expectation
    expected_sum: float = 0.0  # tokens those rounds were expected to commit
    expected_rounds: int = 0  # how many they were

    def drafting(self) -> bool:
        """Whether this round drafts."""
        if not self.enabled:
            return True
        if self.pause > 0 or self.owed > 0:
            self.pause = max(self.pause - 1, 0)
            self.plain_rounds += 1
            return False
        return True

    def reopening(self) -> bool:
        """Whether a drafting round now is a probe's first: its draft owes the projection of the context the
        plain rounds before it committed, which the caller times apart (module doc)."""
        return self.probe_left == PROBE_ROUNDS

    def calibration(self) -> float:
        """Tokens drafting rounds committed per expected token so far, shrunk toward 1 (module doc)."""
        if not self.expected_rounds:
            return 1.0
        prior = CALIBRATION_ROUNDS * self.expected_sum / self.expected_rounds  # that many rounds' expected tokens
        return (self.committed_sum + prior) / (self.expected_sum + prior)

    def record(
        self, drafted: bool, tokens: float, seconds: float, plain_estimate: float, expected: float | None = None
    ) -> None:
        """A finished round: `tokens` (or any measure of them, e.g. the batch's plain-rate units) in
        `seconds`; `plain_estimate` = that measure per second of a plain round before one was measured;
        `expected`: a drafting round's expected tokens in the same measure, judged instead of `tokens`
        once scaled by `calibration` (module doc; None: `tokens` are judged)."""
        if drafted and expected is not None:
            self.committed_sum += tokens
            self.expected_sum += expected
            self.expected_rounds += 1
            tokens = expected * self.calibration()
        rate = tokens / max(seconds, 1e-9)
        if not drafted:
            self.plain_rate = rate if self.plain_rate is None else (1 - WEIGHT) * self.plain_rate + WEIGHT * rate
            self.owed = max(self.owed - seconds, 0.0)
            return
        probe = None  # (tokens, seconds) of a retry judged now
        if self.probe_left > 0:
            self.probe_tokens += tokens
            self.probe_seconds += seconds
            self.probe_left -= 1
            if self.probe_left > 0:
                return
            probe = self.probe_tokens, self.probe_seconds
            self.draft_rate = self.probe_tokens / max(self.probe_seconds, 1e-9)
            self.probe_tokens = self.probe_seconds = 0.0
        else:
            self.draft_rate = (1 - WEIGHT) * self.draft_rate + WEIGHT * rate
        plain = self.plain_rate if self.plain_rate is not None else plain_estimate
        if self.draft_rate < plain:
            self.pause, self.next_pause = self.next_pause, min(2 * self.next_pause, LONGEST_PAUSE)
            self.probe_left = PROBE_ROUNDS
            if probe is not None and self.probe_share:
                lost = probe[1] - probe[0] / max(plain, 1e-9)  # seconds beyond plain rounds' for its tokens
                self.owed = max(lost, 0.0) / self.probe_share
        else:
            self.next_pause = FIRST_PAUSE
