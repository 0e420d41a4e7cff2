"""Replay a batch-1 run's drafting rounds through `DraftGate`: what the gate keeps of always drafting.

    domino-decode preset=smollm2 'bench=[sharegpt:40]' 'methods=[ar,ddtree,dominotree]' draft_gate=false \
        drafter_path=... baseline_drafter_path=... hydra.run.dir=RUN    # every round drafts, timed
    python benchmarks/gate_replay.py RUN --slowdown 1 1.25 1.5 2 3

A run with the gate off records every round's committed tokens, wall seconds and expected tokens
(`stats.accept_lengths`, `stats.round_s`, `stats.predicted`: the gate judges the last), and its `ar`
records give each prompt's plain round (decode seconds per token). The replay walks each prompt's
output: a round the gate lets draft takes the recorded drafting round that starts at the output's
position, its seconds times `slowdown` (drafting made to lose, as a slower drafter or a dearer verify
would); a paused round decodes one token in the prompt's plain round. The gate sees what it would have
measured and is kept across prompts, as a decoder keeps it. Per method and slowdown: tokens/s of `ar`,
of always drafting and of each gate variant (the default; pauses by round count alone) with its share of
plain rounds, and the variant's throughput over the better of the first two. It approximates: a paused
stretch does not change what the drafter proposes after it, and a retry's one-time catch-up projection
is not charged.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # the checkout's packages, whatever is installed
    sys.path.insert(0, str(HERE.parent))

from inference.decoding.draft_gate import DraftGate  # noqa: E402

VARIANTS: dict[str, Callable[[], DraftGate]] = {
    "gate": DraftGate,
    "round pause only": lambda: DraftGate(probe_share=None),
}


def read_runs(run: Path) -> dict[str, dict[str, dict]]:
    """method -> prompt key -> record row of a batch-1 run's `records.jsonl` (finished generations only)."""
    by: dict[str, dict[str, dict]] = {}
    for line in (run / "records.jsonl").read_text().splitlines():
        for row in json.loads(line):
            if row.get("concurrency", 1) == 1 and "skipped" not in row:
                by.setdefault(row["method"], {})[f"{row['dataset']}/{row['prompt_id']}/{row['turn']}"] = row
    return by


def replay(rows: dict[str, dict], ar: dict[str, dict], gate: DraftGate | None, slowdown: float) -> tuple[float, float]:
    """(tokens / s, share of plain rounds) of `gate` (None: always draft) over the method's records `rows`."""
    tokens = seconds = 0.0
    plain = total = 0
    for key, row in rows.items():
        stats, base = row["stats"], ar[key]["stats"]
        plain_s = base["decode_s"] / max(base["output_tokens"] - 1, 1)
        predicted = stats.get("predicted") or [None] * len(stats["accept_lengths"])
        rounds = list(zip(stats["accept_lengths"], stats["round_s"], predicted, strict=True))
        starts, at = [], 0
        for n, _, _ in rounds:
            starts.append(at)
            at += n
        done, i = 0, 0
        while done < at:
            total += 1
            drafted = gate is None or gate.drafting()
            if drafted:  # the next recorded round not yet replayed that starts at or after the output's position
                while i < len(rounds) - 1 and starts[i] < done:
                    i += 1
                n, s, expected = rounds[min(i, len(rounds) - 1)]
                n, s = min(n, at - done), s * slowdown
                i += 1
            else:
                n, s, expected = 1, plain_s, None
                plain += 1
            if gate is not None:
                gate.record(drafted, n, s, 1.0 / plain_s, expected)
            tokens, seconds, done = tokens + n, seconds + s, done + n
    return tokens / max(seconds, 1e-9), plain / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a batch-1 domino-decode run made with draft_gate=false, ar included")
    parser.add_argument("--slowdown", type=float, nargs="+", default=[1.0, 1.25, 1.5, 2.0, 3.0])
    args = parser.parse_args()
    by = read_runs(args.run)
    if "ar" not in by:
        sys.exit(f"gate_replay: {args.run} has no batch-1 ar records: decode with ar among the methods")
    ar = by.pop("ar")
    ar_rate = sum(r["output_tokens"] - 1 for r in ar.values()) / sum(r["stats"]["decode_s"] for r in ar.values())
    print("| method | slowdown | ar tok/s | always | " + " | ".join(VARIANTS) + " |")
    print("|---|---|---|---|" + "---|" * len(VARIANTS))
    for method, rows in sorted(by.items()):
        rows = {k: r for k, r in rows.items() if k in ar and r["stats"].get("round_s")}
        if any(r["stats"].get("plain_rounds") for r in rows.values()):
            sys.exit(f"gate_replay: {method} decoded plain rounds: decode with draft_gate=false")
        for slowdown in args.slowdown:
            always, _ = replay(rows, ar, None, slowdown)
            best = max(always, ar_rate)
            cells = []
            for make in VARIANTS.values():
                rate, share = replay(rows, ar, make(), slowdown)
                cells.append(f"{rate:.1f} ({share:.0%} plain, {rate / best:.3f})")
            print(f"| {method} | {slowdown:g} | {ar_rate:.1f} | {always:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
