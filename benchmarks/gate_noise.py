"""`DraftGate` on simulated rounds near break-even: judging committed tokens against expected ones.

    python benchmarks/gate_noise.py                          # 4 rows, budget-2-like drafts, +-15 % around break-even
    python benchmarks/gate_noise.py --rows 8 --time-noise 0.1 --advantages -0.1 0 0.1

Each drafting round, every row keeps two drafts: the first accepted with probability p1, the second (after
the first) with p2, each row's p1 and p2 drawn around `--p1` / `--p2` (sd `--spread`) as a drafter's
confidence varies from row to row and round to round. The round commits 1 + the accepted drafts per row,
and was expected to commit 1 + p1 + p1 p2 per row (a calibrated acceptance model). Its seconds are the
drafting cost (chosen so that drafting gains `advantage` over plain rounds in expectation) times
1 + N(0, `--time-noise`); a plain round commits 1 token per row in 1 x (1 + noise). The gate sees each
round's tokens per row and seconds, as `BatchBudget` feeds it plain-rate units.

Per advantage: the throughput of the gate judging the tokens rounds committed, and of the gate judging
their expectation (the default, `draft_gate.py`), each over the better of always drafting and never, with
the share of rounds it kept plain, means over `--seeds` runs of `--rounds` rounds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # the checkout's packages, whatever is installed
    sys.path.insert(0, str(HERE.parent))

from inference.decoding.draft_gate import DraftGate  # noqa: E402

MODES = ("always", "never", "committed", "expected")


def _clip(p: float) -> float:
    return min(max(p, 0.02), 0.98)


def simulate(
    mode: str,
    advantage: float,
    rows: int = 4,
    p1: float = 0.45,
    p2: float = 0.4,
    spread: float = 0.2,
    time_noise: float = 0.06,
    rounds: int = 3000,
    seed: int = 0,
) -> tuple[float, float]:
    """(tokens per second, share of plain rounds) of one policy: `always` / `never` draft, or a `DraftGate`
    judging the `committed` or the `expected` tokens of its drafting rounds."""
    rng = random.Random(seed)
    gate = DraftGate()
    cost = (1 + p1 + p1 * p2) / (1 + advantage)  # a drafting round's mean seconds: its gain over plain rounds
    tokens = seconds = 0.0
    plain = 0
    for _ in range(rounds):
        drafting = mode == "always" or (mode != "never" and gate.drafting())
        if drafting:
            committed = expected = 0.0
            for _ in range(rows):
                a, b = _clip(rng.gauss(p1, spread)), _clip(rng.gauss(p2, spread))
                expected += 1 + a + a * b
                committed += 1 + (rng.random() < a) * (1 + (rng.random() < b))
            n, s = committed / rows, cost * (1 + rng.gauss(0, time_noise))
            foreseen = expected / rows if mode == "expected" else None
        else:
            n, s, foreseen = 1.0, 1 + rng.gauss(0, time_noise), None
            plain += 1
        if mode in ("committed", "expected"):
            gate.record(drafting, n, s, plain_estimate=1.0, expected=foreseen)
        tokens, seconds = tokens + n, seconds + s
    return tokens / seconds, plain / rounds


def table(advantages: list[float], seeds: int, **model: float) -> list[dict[str, float]]:
    """Per advantage: each gate's throughput over the better of always and never, and its plain share."""
    out = []
    for advantage in advantages:
        runs = {m: [simulate(m, advantage, seed=s, **model) for s in range(seeds)] for m in MODES}
        rate = {m: statistics.mean(r for r, _ in runs[m]) for m in MODES}
        best = max(rate["always"], rate["never"])
        row = {"advantage": advantage}
        for m in ("committed", "expected"):
            row[m] = rate[m] / best
            row[f"{m} plain"] = statistics.mean(p for _, p in runs[m])
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--advantages", type=float, nargs="+", default=[-0.15, -0.08, -0.04, 0.0, 0.04, 0.08, 0.15])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--p1", type=float, default=0.45, help="mean acceptance of a row's first draft")
    parser.add_argument("--p2", type=float, default=0.4, help="mean acceptance of its second, after the first")
    parser.add_argument("--spread", type=float, default=0.2, help="sd of a row's p1 and p2 round to round")
    parser.add_argument("--time-noise", type=float, default=0.06, help="sd of a round's seconds, relative")
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args(argv)
    model = {"rows": args.rows, "p1": args.p1, "p2": args.p2, "spread": args.spread}
    model |= {"time_noise": args.time_noise, "rounds": args.rounds}
    print("| drafting gains | gate on committed tokens | plain rounds | gate on expected tokens | plain rounds |")
    print("|---|---|---|---|---|")
    for row in table(args.advantages, args.seeds, **model):
        print(
            f"| {row['advantage']:+.0%} | {row['committed']:.3f} | {row['committed plain']:.0%} "
            f"| {row['expected']:.3f} | {row['expected plain']:.0%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
