"""The loggers a requeued run relies on: CSV rows survive a resume; the W&B config is the run config."""

import csv

from domino_train.run.loggers import AblationWandbLogger, ResumableCSVLogger


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_csv_logger_appends_after_a_resume(tmp_path):
    first = ResumableCSVLogger(tmp_path, name="csv", version="")
    first.log_metrics({"train/loss": 2.0}, step=0)
    first.log_metrics({"train/loss": 1.5}, step=1)
    first.save()
    resumed = ResumableCSVLogger(tmp_path, name="csv", version="")  # same folder, as after a requeue
    resumed.log_metrics({"train/loss": 1.4}, step=1)
    resumed.log_metrics({"train/loss": 1.2, "val/tau_final": 1.3}, step=2)  # a new column rewrites the header
    resumed.save()
    rows = _rows(tmp_path / "csv" / "metrics.csv")
    assert [(r["step"], r["train/loss"]) for r in rows] == [("0", "2.0"), ("1", "1.5"), ("1", "1.4"), ("2", "1.2")]
    assert rows[-1]["val/tau_final"] == "1.3" and rows[0]["val/tau_final"] == ""


def test_wandb_config_is_the_run_config_at_top_level(monkeypatch):
    logged = {}
    monkeypatch.setattr(
        "lightning.pytorch.loggers.WandbLogger.log_hyperparams", lambda self, params: logged.update(params)
    )
    logger = AblationWandbLogger(project="p", offline=True, summaries={"val/tau_final": "max"})
    run_config = {"task_name": "tiny", "seed": 3, "train": {"causal_input": "ttt"}}
    logger.log_hyperparams({"run_config": run_config, "drafter_config": {"block_size": 8}, "lr": 1e-3})
    assert logged == {**run_config, "drafter_config": {"block_size": 8}}
