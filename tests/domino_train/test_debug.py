"""`debug=cpu` shrinks every experiment to a few CPU steps on a tiny target, ending in an export."""

import logging
import signal
import sys
from pathlib import Path

import pytest

from domino_train import CONF_DIR
from domino_train.cli import train as train_cli
from inference import DominoDrafter, tiny_target

EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_debug_cpu_runs_every_experiment_on_a_tiny_target_and_exports(experiment, tmp_path, monkeypatch):
    root, sigint = logging.getLogger(), signal.getsignal(signal.SIGINT)
    handlers, level = root.handlers[:], root.level
    command = [f"experiment={experiment}", "debug=cpu", "target.spec=tiny-qwen3", f"paths.root_dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", ["domino-train", *command, "run_id=check", "trainer.enable_progress_bar=false"])
    try:
        train_cli.main()
    finally:
        root.handlers[:], root.level = handlers, level  # Hydra pointed them at pytest's captured streams
        signal.signal(signal.SIGINT, sigint)
    run = tmp_path / "artifacts" / "runs" / f"debug_{experiment}" / "check"
    drafter = DominoDrafter.from_pretrained(run / "export", target_config=tiny_target().config)
    assert (drafter.head is None) == experiment.endswith("dflash")
    assert (run / "checkpoints" / "last.ckpt").is_file()
