"""Slurm without a cluster: Lightning's Slurm plugins, the launcher's counts, and the sbatch script of a
multi-node GPU sweep (recorded by `fake_slurm.py`'s sbatch: no one-node CPU Slurm would take it).

Jobs that run under a real Slurm (the sbatch template, its requeue, a submitit sweep with preemption,
failure and rerun) are in tests/launch/, marked `slurm`.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch import Trainer

import fake_slurm
from domino_train import CONF_DIR
from domino_train.cli.train import main as train_main
from domino_train.run.train import build

SLURM_ENV = {
    "SLURM_JOB_ID": "77",
    "SLURM_JOB_NAME": "domino",
    "SLURM_NTASKS": "1",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_NNODES": "1",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_NODELIST": "localhost",
}


@pytest.fixture
def fake_cluster(tmp_path, monkeypatch):
    """The recording sbatch (and an srun for submitit to find) first on PATH, runs under tmp_path; returns its
    state folder: no real Slurm is needed, nor touched where one is installed."""
    fake_slurm.install(tmp_path / "bin", tmp_path / "slurm")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOMINO_ROOT", str(tmp_path))
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # the real exception instead of Hydra's exit(1)
    return tmp_path / "slurm"


def _multirun(monkeypatch, *overrides: str) -> None:
    """`python -m domino_train -m ...` in this process (it only composes and submits)."""
    GlobalHydra.instance().clear()
    monkeypatch.setattr(sys, "argv", ["domino_train", "-m", *overrides])
    train_main()


def test_lightning_leaves_requeueing_to_submitit_under_slurm(tiny_cfg, monkeypatch):
    for k, v in SLURM_ENV.items():
        monkeypatch.setenv(k, v)
    _, _, trainer = build(tiny_cfg())
    env = trainer._accelerator_connector.cluster_environment
    assert isinstance(env, SLURMEnvironment) and not env.auto_requeue
    before = signal.getsignal(signal.SIGUSR1)
    trainer._signal_connector.register_signal_handlers()
    try:
        assert signal.getsignal(signal.SIGUSR1) is before  # no second owner of the requeue signal
    finally:
        trainer._signal_connector.teardown()
    lightning_default = Trainer(accelerator="cpu", logger=False, enable_checkpointing=False)
    lightning_default._signal_connector.register_signal_handlers()  # what the plugin prevents
    try:
        assert signal.getsignal(signal.SIGUSR1) is not before
    finally:
        lightning_default._signal_connector.teardown()


def test_launcher_counts_follow_the_trainer(tmp_path, monkeypatch):
    monkeypatch.delenv("DOMINO_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # as in the process that submits a multirun
    GlobalHydra.instance().clear()
    with initialize_config_dir(CONF_DIR, version_base="1.3"):
        gpu = compose(
            "train",
            ["hydra/launcher=submitit_slurm", "experiment=qwen3_8b_curriculum", "trainer.num_nodes=4"],
            return_hydra_config=True,
        )
        cpu = compose("train", ["hydra/launcher=submitit_local", "experiment=tiny"], return_hydra_config=True)
    launcher = gpu.hydra.launcher
    assert (launcher.nodes, launcher.tasks_per_node, launcher.gpus_per_node) == (4, 8, 8)
    assert launcher.max_num_timeout > 0 and launcher.signal_delay_s == 120
    assert (cpu.hydra.launcher.tasks_per_node, cpu.hydra.launcher.gpus_per_node) == (1, None)
    # the sweep folder resolves there, although ${hydra:runtime.cwd} does not
    assert launcher.submitit_folder == f"{tmp_path}/artifacts/runs/multirun/{gpu.sweep_id}/.submitit/%j"


def test_sbatch_of_a_multinode_gpu_sweep(fake_cluster, monkeypatch):
    with pytest.raises(Exception, match=fake_slurm.REFUSAL):
        _multirun(
            monkeypatch,
            "hydra/launcher=submitit_slurm",
            "trainer=gpu",
            "trainer.num_nodes=2",
            "experiment=qwen3_8b_curriculum,qwen3_8b_ttt",
            "sweep_id=dry",
            "hydra.launcher.timeout_min=600",
            "hydra.launcher.partition=gpu",
        )
    (script,) = (fake_cluster / "scripts").glob("*.sh")
    lines = set(script.read_text().splitlines())
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --time=600",
        "#SBATCH --signal=USR2@120",
        "#SBATCH --partition=gpu",
        "#SBATCH --array=0-1%2",
        "#SBATCH --job-name=domino-train",  # the sweep's shared task name (the experiments are swept)
    ):
        assert line in lines, line


def test_sweep_whose_jobs_need_other_devices_is_refused_before_submitting(fake_cluster, monkeypatch):
    with pytest.raises(SystemExit, match=r"nodes x devices x GPUs = 1 x 8 x 8 but the sbatch array asks for 1 x 1 x 0"):
        _multirun(monkeypatch, "hydra/launcher=submitit_slurm", "experiment=qwen3_8b_curriculum,qwen3_8b_ttt")
    assert not (fake_cluster / "scripts").exists()
