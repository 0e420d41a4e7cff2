"""benchmarks/compare_runs.py: several decode runs in one table, each labelled by its folder."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import compare_runs  # noqa: E402

from inference.eval.results import ResultsFileError  # noqa: E402


def _run(folder: Path, tree_speedup: float, sizes: list[int]) -> Path:
    folder.mkdir(parents=True)
    tree = {"tokens_per_s": 30.0, "speedup": tree_speedup, "tau": 2.0, "draft_size_histogram": sizes}
    tree |= {"predicted_tokens_per_round": 2.1, "realised_tokens_per_round": 2.0}
    tree["divergences"] = {"exact": 3, "numerical": 1, "algorithmic": 0}
    batched = tree | {"throughput_tok_s": 90.0, "speedup": 0.9, "decode_speedup": 0.8}
    results = {"sharegpt": {"ar": {"tokens_per_s": 20.0, "speedup": 1.0, "tau": 1.0}, "ddtree": tree}}
    results["sharegpt"]["ddtree@4"] = batched
    (folder / "results.json").write_text(json.dumps({"results": results, "mean": {}}))
    return folder


def test_rows_group_each_method_over_the_runs_in_the_order_given(tmp_path, capsys):
    small = _run(tmp_path / "budget_4", 1.2, [0, 0, 0, 0, 10])
    auto = _run(tmp_path / "budget_auto", 1.3, [0, 0, 5, 0, 5])
    table = compare_runs.rows([small, auto / "results.json"], methods=["ddtree"])
    assert [r[1:3] for r in table] == [
        ["ddtree", "budget_4"],
        ["ddtree", "budget_auto"],
        ["ddtree@4", "budget_4"],  # the method at every concurrency
        ["ddtree@4", "budget_auto"],
    ]
    assert table[1][3:] == ["30.0", "1.30x", "-", "2.00", "3.0", "2.10", "2.00", "3 / 1 / 0"]
    assert table[3][3:6] == ["90.0", "0.90x", "0.80x"]  # a batched arm: its throughput and decode speedup
    assert compare_runs.main([str(small), str(auto)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| dataset | method | run |") and len(out) == 2 + 6  # ar, ddtree, ddtree@4 per run
    assert out[2].startswith("| sharegpt | ar | budget_4 | 20.0 | 1.00x | - | 1.00 | - |")


def test_spread_reads_the_runs_as_repeats_of_one_setting(tmp_path, capsys):
    runs = [_run(tmp_path / f"repeat_{i}", speedup, [0, 4]) for i, speedup in enumerate([1.1, 1.3, 1.2])]
    table = compare_runs.spread(runs[:2] + [runs[2] / "results.json"], methods=["ddtree"])
    assert [r[:3] for r in table] == [["sharegpt", "ddtree", "3"], ["sharegpt", "ddtree@4", "3"]]
    assert table[0][3:] == ["1.20x ± 0.10 (1.10-1.30)", "-"]  # no decode speedup: a batch-1 arm
    assert table[1][3:] == ["0.90x ± 0.00 (0.90-0.90)", "0.80x ± 0.00 (0.80-0.80)"]
    assert compare_runs.spread(runs[:1])[1][3] == "1.10x"  # one run: its value alone
    assert compare_runs.main([*map(str, runs), "--spread"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| dataset | method | runs | speedup | decode speedup |" and len(out) == 2 + 3


def test_a_folder_without_results_is_refused_naming_it(tmp_path):
    with pytest.raises(ResultsFileError, match="does not exist"):
        compare_runs.rows([tmp_path])
