"""Several domino-decode runs side by side: one row per (dataset, method, run), for sweeps over a setting.

    python benchmarks/compare_runs.py artifacts/runs/decode/cost_sweep/budget_*   # a folder or its results.json
    python benchmarks/compare_runs.py RUN... --methods ddtree dominotree
    python benchmarks/compare_runs.py artifacts/runs/decode/speed_c4*/paired --spread   # repeats of one run

Each run's label is its folder name. Per row: tok/s (a batched arm's, `ddtree@4`: its throughput), speedup
over the run's own `ar` (at the arm's concurrency), the decode phase's speedup (batched arms: the prefills
left out), tau, the mean draft size verified per round, predicted and realised tokens per round, and the
divergence counts (exact / numerical / algorithmic). `--methods ddtree` keeps `ddtree` at every
concurrency. Runs decode with their own `ar`, so a speedup compares within a run; tok/s compares across
runs only when the machine was equally quiet for all of them.

`--spread` reads the runs as repeats of one setting: one row per (dataset, method) with the mean, the sample
standard deviation and the range of its speedup and decode speedup over the runs that hold it. On a shared
machine the same arm's speedup moves by several percent from run to run; a difference between two arms is
a finding only where it exceeds that spread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # the checkout's packages, whatever is installed
    sys.path.insert(0, str(HERE.parent))

from inference.eval.results import read_results  # noqa: E402

HEADER = ["dataset", "method", "run", "tok/s", "speedup", "decode speedup", "tau", "mean draft", "predicted"]
HEADER += ["realised", "e / n / a"]
SPREAD_HEADER = ["dataset", "method", "runs", "speedup", "decode speedup"]


def _num(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def mean_draft(histogram: list[int] | None) -> float | None:
    """The mean draft size of a histogram indexed by size (None without logged rounds)."""
    rounds = sum(histogram or [])
    return sum(n * c for n, c in enumerate(histogram)) / rounds if rounds else None


def arms(paths: list[Path], methods: list[str] | None = None) -> Iterator[tuple[int, str, str, str, dict]]:
    """(the run's order, its label, dataset, method, its results) of every arm of the runs, in file order;
    `methods` keeps those methods at every concurrency."""
    for order, path in enumerate(paths):
        results = read_results(path / "results.json" if path.is_dir() else path)["results"]
        label = (path if path.is_dir() else path.parent).name
        for dataset, by_method in results.items():
            for method, s in by_method.items():
                if not methods or method.partition("@")[0] in methods:
                    yield order, label, dataset, method, s


def rows(paths: list[Path], methods: list[str] | None = None) -> list[list[str]]:
    """The table's rows, sorted by dataset, then method, then the order the runs were given."""
    table = []
    for order, label, dataset, method, s in arms(paths, methods):
        div = s.get("divergences")
        rate = s.get("throughput_tok_s") if "@" in method else s.get("tokens_per_s")
        table.append(
            [dataset, method, label, _num(rate, ".1f"), _num(s.get("speedup"), ".2f", "x")]
            + [_num(s.get("decode_speedup"), ".2f", "x")]
            + [_num(s.get("tau"), ".2f"), _num(mean_draft(s.get("draft_size_histogram")), ".1f")]
            + [_num(s.get("predicted_tokens_per_round"), ".2f")]
            + [_num(s.get("realised_tokens_per_round"), ".2f")]
            + [" / ".join(str(v) for v in div.values()) if div else "-", order]
        )
    table.sort(key=lambda r: (r[0], r[1], r[-1]))
    return [r[:-1] for r in table]


def summary(values: list[float]) -> str:
    """mean ± sample sd (min-max) of a speedup over runs; the mean alone for one run."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}x"
    return f"{statistics.mean(values):.2f}x ± {statistics.stdev(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def spread(paths: list[Path], methods: list[str] | None = None) -> list[list[str]]:
    """One row per (dataset, method) over the runs as repeats: how many runs hold it, then `summary` of its
    speedup and of its decode speedup (batched arms), sorted by dataset, then method."""
    runs: Counter[tuple[str, str]] = Counter()
    values: dict[tuple[str, str, str], list[float]] = {}
    for _, _, dataset, method, s in arms(paths, methods):
        runs[dataset, method] += 1
        for key in ("speedup", "decode_speedup"):
            values.setdefault((dataset, method, key), [])
            if s.get(key) is not None:
                values[dataset, method, key].append(float(s[key]))
    return [
        [dataset, method, str(n), summary(values[dataset, method, "speedup"])]
        + [summary(values[dataset, method, "decode_speedup"])]
        for (dataset, method), n in sorted(runs.items())
    ]


def markdown(table: list[list[str]], header: list[str] = HEADER) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in table])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="domino-decode run folders (or their results.json)")
    parser.add_argument("--methods", nargs="+", default=None, help="only these methods (default: every one)")
    parser.add_argument("--spread", action="store_true", help="the runs as repeats: mean, sd and range per arm")
    args = parser.parse_args(argv)
    if args.spread:
        print(markdown(spread(args.runs, args.methods), SPREAD_HEADER))
    else:
        print(markdown(rows(args.runs, args.methods)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
