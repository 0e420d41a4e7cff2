"""benchmarks/gpu_check.py: stages that fail, hang or skip are recorded and the rest still run; the dry run
runs every stage on tiny shapes on the CPU, so the GPU script cannot rot between GPU loans."""

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402
from checks.gpu_tests import counts  # noqa: E402

STAGE_NAMES = list(gpu_check.STAGE_BUDGETS)


def _fake(name: str, body: str, budget: int = 30) -> gpu_check.Stage:
    """A stage whose process runs `body` with `report` = the path of its stage report."""
    code = "import json, sys, time, pathlib\nreport = pathlib.Path(sys.argv[1])\n" + textwrap.dedent(body)
    return gpu_check.Stage(name, [sys.executable, "-c", code, "{report}"], budget)


def _stages(out: Path, *stages: gpu_check.Stage) -> list[gpu_check.Stage]:
    report = str(out / "stages" / "{}.json")
    return [
        gpu_check.Stage(s.name, [a.replace("{report}", report.format(s.name)) for a in s.argv], s.budget_s)
        for s in stages
    ]


def test_every_stage_is_recorded_whatever_the_others_do(tmp_path):
    for sub in ("stages", "logs"):
        (tmp_path / sub).mkdir()
    stages = _stages(
        tmp_path,
        _fake("crashes", "print('about to fail'); raise SystemExit(3)"),
        _fake("hangs", "print('waiting', flush=True); time.sleep(60)", budget=2),
        _fake("skips", "report.write_text(json.dumps({'status': 'skipped', 'error': 'skipped: no drafters'}))"),
        _fake("lies", "report.write_text(json.dumps({'status': 'ok'})); raise SystemExit(1)"),
        _fake(
            "works",
            "report.write_text(json.dumps({'status': 'ok', 'results': {'ms': 1.5}, "
            "'tables': [{'title': 't', 'header': ['a'], 'rows': [[1]]}]}))",
        ),
    )
    results = {r.name: r for r in gpu_check.run_stages(stages, tmp_path)}
    assert [r.status for r in results.values()] == ["failed", "failed", "skipped", "failed", "ok"]
    assert "exit status 3" in results["crashes"].error and "about to fail" in results["crashes"].error
    assert "timed out after 2 s" in results["hangs"].error and "waiting" in results["hangs"].error
    assert results["hangs"].wall_s < 30
    assert "after an ok report" in results["lies"].error
    assert results["works"].results == {"ms": 1.5} and results["works"].error is None
    summary = gpu_check.write_summary(list(results.values()), tmp_path, False, "now", 1.0)
    assert not summary["ok"] and json.loads((tmp_path / "summary.json").read_text())["ok"] is False
    md = (tmp_path / "summary.md").read_text()
    assert md.startswith("# GPU check: FAILED") and "| skips | skipped |" in md and "## works: t" in md
    only_skip = gpu_check.write_summary([results["skips"], results["works"]], tmp_path, False, "now", 1.0)
    assert only_skip["ok"]  # a skipped stage does not fail the check


def test_a_real_run_without_cuda_fails_with_a_clear_message(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    (tmp_path / "stages").mkdir()
    assert gpu_check.stage_main("bit_identity", tmp_path, dry_run=False) == 1
    report = json.loads((tmp_path / "stages" / "bit_identity.json").read_text())
    assert report["status"] == "failed" and "no CUDA device" in report["error"] and "--dry-run" in report["error"]


def test_only_the_gpu_run_enforces_the_stage_budgets(tmp_path):
    """The dry run's wall time is a (possibly loaded) CPU's: a budget there would fail a working script."""
    assert {s.name: s.budget_s for s in gpu_check.default_stages(tmp_path, False)} == gpu_check.STAGE_BUDGETS
    assert {s.budget_s for s in gpu_check.default_stages(tmp_path, True)} == {None}
    result = gpu_check.StageResult("training", "ok", 250.0, None)
    summary = {"ok": True, "dry_run": True, "started": "now", "total_s": 250.0, "environment": {}}
    assert "| training | ok | 250.0 | none |  |" in gpu_check.markdown({**summary, "stages": [asdict(result)]})


def test_unknown_stages_are_refused(tmp_path):
    with pytest.raises(SystemExit, match="unknown stage"):
        gpu_check.default_stages(tmp_path, True, ["bit_identity", "nope"])


def test_pytest_summary_counts():
    assert counts("3 passed, 1 skipped, 380 deselected in 4.10s") == {"passed": 3, "skipped": 1, "deselected": 380}
    assert counts("1 failed, 2 errors in 1s") == {"failed": 1, "errors": 2}


@pytest.mark.slow
def test_dry_run_passes_every_stage_on_the_cpu(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), str(tmp_path), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    stages = {s["name"]: s for s in summary["stages"]}
    assert list(stages) == STAGE_NAMES
    failed = {n: s["error"] for n, s in stages.items() if s["status"] != "ok"}
    assert not failed and proc.returncode == 0, (failed, proc.stdout[-3000:])
    assert summary["dry_run"] and summary["ok"]
    assert stages["decoding"]["results"]["methods"]["dominotree"]["lossless"]
    assert stages["bit_identity"]["results"]["mismatched_rounds"] == {}
    swept = stages["budgets"]["results"]["methods"]
    assert {m: [r["budget"] for r in rows] for m, rows in swept.items()} == {
        m: [2, 4, "auto"] for m in ("ddtree", "dominotree")
    }
    assert all(r["divergences"]["algorithmic"] == 0 and r["mean_tree"] <= 4 for rows in swept.values() for r in rows)
    batched = stages["concurrency"]["results"]["methods"]
    assert {m: [r["concurrency"] for r in rows] for m, rows in batched.items()} == {
        m: [1, 2] for m in ("ar", "domino", "ddtree", "dominotree")
    }
    assert all(r["equal_to_ar"] == 2 for rows in batched.values() for r in rows)
    assert (tmp_path / "summary.md").read_text().startswith("# GPU check: all stages passed")
