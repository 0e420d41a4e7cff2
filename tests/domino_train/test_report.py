"""`domino-report` on two tiny offline runs (a Domino drafter and its no-head ablation)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from domino_train.cli.report import main
from domino_train.report import wandb_api
from domino_train.report.local_runs import load_run
from domino_train.report.plots import x_values
from domino_train.report.wandb_file import merge, offline_run_files, read_wandb_file
from domino_train.run.train import train

VARIANTS = {"domino": [], "dflash": ["drafter.head=null"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, compose_train):
    """Two finished runs under <root>/artifacts/runs/tiny/{domino,dflash}, CSV + offline W&B each."""
    root = tmp_path_factory.mktemp("report")
    log_dir = root / "artifacts" / "runs"
    for name, extra in VARIANTS.items():
        cfg = compose_train(
            [
                "experiment=tiny",
                "logger=wandb",
                "trainer.max_steps=8",
                "trainer.val_check_interval=4",
                "callbacks.model_checkpoint.every_n_train_steps=8",
                "data.num_rows=24",
                "data.val_size=4",
                "trainer.enable_progress_bar=false",
                "trainer.enable_model_summary=false",
                f"paths.output_dir={log_dir / 'tiny' / name}",
                *extra,
            ],
            root,
        )
        train(cfg)
    return log_dir


def _best(run_dir: Path, metric: str, pick=max) -> float:
    with open(run_dir / "csv" / "metrics.csv", newline="") as f:
        return pick(float(r[metric]) for r in csv.DictReader(f) if r.get(metric))


def test_report_from_run_folders(runs, tmp_path, capsys):
    assert main([str(runs), "--out", str(tmp_path), "--title", "tiny ablation"]) == 0
    table = capsys.readouterr().out
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# tiny ablation") and "![curves.png](curves.png)" in report
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| tiny")}
    assert set(rows) == {"tiny (drafter.head=domino)", "tiny (drafter.head=null)"}
    domino = rows["tiny (drafter.head=domino)"].split(" | ")
    assert domino[1:3] == ["1 (0)", "8"]
    assert float(domino[3]) == pytest.approx(_best(runs / "tiny" / "domino", "val/tau_final"), abs=5e-4)
    assert float(domino[5]) == pytest.approx(_best(runs / "tiny" / "domino", "val/ce_final", min), abs=5e-4)
    for png in ("curves.png", "by_position.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG" and (tmp_path / png).stat().st_size > 5_000


def test_offline_wandb_runs_hold_the_same_curves_as_the_csv(runs, tmp_path):
    for name in VARIANTS:
        folder = runs / "tiny" / name
        from_csv = load_run(folder)
        (offline,) = offline_run_files(folder)
        alone = tmp_path / name / offline.parent.name  # an offline W&B run copied away from its run folder
        shutil.copytree(offline.parent, alone)
        from_wandb = load_run(alone)
        assert from_wandb.key == from_csv.key == f"tiny-{name}"
        assert from_wandb.config["drafter"] == from_csv.config["drafter"]
        for metric in ("train/loss", "train/lambda", "val/tau_final", "val/acc_final/pos03"):
            (steps, values), (csv_steps, csv_values) = (
                zip(*r.curves[metric], strict=True) for r in (from_wandb, from_csv)
            )
            assert steps == csv_steps and values == pytest.approx(csv_values, rel=1e-6), metric
        run = merge([read_wandb_file(offline)])
        assert run.job_type == "train" and run.group == "tiny"
        assert run.tags[:3] == ["tiny-qwen3", "b8", "domino" if name == "domino" else "no_head"]


def _results(path: Path, drafter: Path, tau: float, speedup: float) -> Path:
    means = {"ar": {"tau": 1.0, "speedup": 1.0}, "domino": {"tau": tau, "speedup": speedup}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"drafter": str(drafter), "mean": means, "results": {"gsm8k": means}}))
    return path


def test_decode_results_join_the_run_they_measured(runs, tmp_path, capsys):
    results = _results(tmp_path / "decode" / "results.json", runs / "tiny" / "domino" / "export", 3.25, 2.5)
    assert main([str(runs), "--eval", str(results), "--out", str(tmp_path / "out")]) == 0
    table = capsys.readouterr().out
    assert "| decode tau | speedup |" in table.splitlines()[0]
    domino = next(line for line in table.splitlines() if "drafter.head=domino" in line)
    dflash = next(line for line in table.splitlines() if "drafter.head=null" in line)
    assert domino.endswith("| 3.25 | 2.50x |") and dflash.endswith("| - | - |")
    assert not (tmp_path / "out" / "predicted_vs_realised.png").exists()  # no decoder logged predictions
    stranger = _results(tmp_path / "other" / "results.json", tmp_path / "not-a-run", 2.0, 1.5)
    with pytest.raises(SystemExit, match="not the export/ of any run given: add that run's folder"):
        main([str(runs), "--eval", str(stranger), "--out", str(tmp_path / "out")])


def test_cost_aware_decoding_plots_predicted_against_realised_tokens(runs, tmp_path):
    results = _results(tmp_path / "decode" / "results.json", runs / "tiny" / "domino" / "export", 3.25, 2.5)
    data = json.loads(results.read_text())
    data["results"]["gsm8k"]["domino"] |= {"predicted_tokens_per_round": 3.1, "realised_tokens_per_round": 3.25}
    results.write_text(json.dumps(data))
    assert main([str(runs), "--eval", str(results), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "predicted_vs_realised.png").is_file()
    assert "predicted_vs_realised.png" in (tmp_path / "out" / "report.md").read_text()


def test_log_eval_writes_an_eval_run_beside_the_training_run(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    results = _results(tmp_path / "decode" / "results.json", runs / "tiny" / "domino" / "export", 3.25, 2.5)
    assert main([str(runs / "tiny" / "domino"), "--eval", str(results), "--log-eval", "--out", str(tmp_path)]) == 0
    (logged,) = (tmp_path / "decode" / "wandb").glob("offline-run-*/run-*.wandb")
    run = read_wandb_file(logged)
    assert run.job_type == "eval" and run.group == "tiny" and run.config["train_run"] == "tiny-domino"
    assert run.summary["eval/domino/speedup"] == 2.5 and run.summary["eval/domino/tau"] == 3.25
    for table in ("eval/results", "eval/speedup_by_method_table", "eval/tau_by_method_table"):
        assert run.rows[0][f"{table}/_type"] == "table-file", table


class _FakeApiRun(SimpleNamespace):
    def scan_history(self):
        return iter(self.rows)


def test_online_report_reads_runs_and_their_eval_from_the_api(runs, tmp_path, monkeypatch, capsys):
    remote = []
    for name in VARIANTS:
        w = merge([read_wandb_file(f) for f in offline_run_files(runs / "tiny" / name)])
        remote.append(
            _FakeApiRun(id=w.run_id, url=f"https://wandb/{w.run_id}", job_type="train", config=w.config, rows=w.rows)
        )
    summary = {"eval/domino/tau": 3.0, "eval/domino/speedup": 2.25}
    remote.append(_FakeApiRun(id="e", url="", job_type="eval", config={"train_run": "tiny-domino"}, summary=summary))
    asked = {}

    def runs_of(path, filters=None):
        asked.update(path=path, filters=filters)
        return remote

    monkeypatch.setattr(wandb_api, "_api", lambda: SimpleNamespace(runs=runs_of))
    assert main(["--wandb", "team/domino", "--group", "tiny", "--out", str(tmp_path / "online")]) == 0
    online = capsys.readouterr().out.splitlines()
    assert asked == {"path": "team/domino", "filters": {"group": "tiny"}}
    assert next(line for line in online if "head=domino" in line).endswith("| 3.00 | 2.25x |")
    assert main([str(runs), "--out", str(tmp_path / "local")]) == 0
    local = capsys.readouterr().out.splitlines()

    def cells(lines):
        return sorted([c.strip(" |") for c in line.split(" | ")[:7]] for line in lines[2:4])

    assert cells(online) == cells(local)  # the same numbers from the API as from the folders


def test_bad_input_is_a_one_line_error(runs, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    half = tmp_path / "half" / "csv"
    half.mkdir(parents=True)
    (half / "hparams.yaml").write_text("run_config: {task_name: x}\n")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))  # no stored login either
    for argv, message in (
        ([], "nothing to report: pass run or sweep folders, or --wandb"),
        ([str(tmp_path / "missing")], "does not exist: pass run folders"),
        ([str(tmp_path / "empty")], "no training runs under"),
        ([str(tmp_path / "half")], "has no logged metrics yet"),
        (["--wandb", "domino"], "must be ENTITY/PROJECT"),
        (["--wandb", "team/domino"], r"cannot use the W&B API .*wandb login"),
        ([str(runs), "--eval", str(tmp_path / "nope.json")], "does not exist: pass the results.json"),
        ([str(runs), "--log-eval"], "--log-eval needs --eval"),
    ):
        with pytest.raises(SystemExit, match=message) as error:
            main([*argv, "--out", str(tmp_path / "out")])
        assert str(error.value).startswith("domino-report: ") and "\n" not in str(error.value)


def test_curves_against_blocks_seen_and_minutes(runs, tmp_path):
    run = load_run(runs / "tiny" / "domino")
    val_steps = [s for s, _ in run.curves["val/tau_final"]]
    blocks = dict(run.curves["train/blocks_seen"])
    assert x_values(run, val_steps, "step") == [float(s) for s in val_steps]
    assert x_values(run, val_steps, "blocks") == [blocks[max(b for b in blocks if b <= s)] for s in val_steps]
    minutes = x_values(run, val_steps, "minutes")
    assert all(0 < a <= b for a, b in zip(minutes, minutes[1:], strict=False))
    del run.curves["train/seconds"]  # a run from before the counter existed: no curve, no crash
    assert x_values(run, val_steps, "minutes") is None
    assert main([str(runs), "--out", str(tmp_path), "--x", "blocks"]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 5_000


def test_a_run_that_failed_is_listed_under_the_table_with_its_state(runs, tmp_path, compose_train, capsys):
    sweep = tmp_path / "sweep"
    shutil.copytree(runs, sweep)
    crashed = sweep / "tiny" / "crashed"
    (crashed / "checkpoints").mkdir(parents=True)
    (crashed / "checkpoints" / "last.ckpt").write_bytes(b"truncated")  # ckpt_path=auto resumes it, and fails
    cfg = compose_train(["experiment=tiny", "logger=csv", f"paths.output_dir={crashed}"], tmp_path)
    with pytest.raises(Exception):  # noqa: B017 (whatever torch.load raises on a truncated file)
        train(cfg)
    status = json.loads((crashed / "status.json").read_text())
    assert status["state"] == "FAILED" and status["log"] is None  # outside submitit no log is known
    assert main([str(sweep), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"| {crashed} | FAILED | - |" in out and "2 variants, 1 unfinished" in out
    assert out.count("| tiny (drafter.head=") == 2  # the finished runs alone make the table
    assert f"| {crashed} | FAILED | - |" in (tmp_path / "out" / "report.md").read_text()
    assert json.loads((runs / "tiny" / "domino" / "status.json").read_text())["state"] == "COMPLETED"


def test_the_report_goes_under_domino_root_by_default(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOMINO_ROOT", str(tmp_path))
    assert main([str(runs)]) == 0
    assert (tmp_path / "artifacts" / "report" / "report.md").is_file()
    assert f"report: {tmp_path / 'artifacts' / 'report' / 'report.md'}" in capsys.readouterr().out
