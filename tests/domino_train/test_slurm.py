"""Slurm without a cluster: the fake sbatch / srun / sacct / scancel / scontrol of `fake_slurm.py` on PATH.

A sweep of the tiny experiment runs through hydra-submitit's Slurm launcher; one of its jobs is preempted
after its first checkpoint (submitit's signal, as `scancel --signal` sends it), requeued by submitit, and
must finish in the same run folder, from that checkpoint, in the same W&B run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch import Trainer

import fake_slurm
from domino_train import CONF_DIR
from domino_train.cli.report import main as report_main
from domino_train.cli.train import main as train_main
from domino_train.report.wandb_file import merge, offline_run_files, read_wandb_file
from domino_train.train import build

REPO = Path(__file__).resolve().parents[2]
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
    """Fake Slurm commands first on PATH, runs under tmp_path; returns the fake's state folder."""
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
    monkeypatch.setenv("FAKE_SLURM_REFUSE", "1")  # record the script, run nothing
    with pytest.raises(Exception, match="FAKE_SLURM_REFUSE"):
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
    monkeypatch.setenv("FAKE_SLURM_REFUSE", "1")  # should the check let it through, nothing runs
    with pytest.raises(SystemExit, match=r"nodes x devices x GPUs = 1 x 8 x 8 but the sbatch array asks for 1 x 1 x 0"):
        _multirun(monkeypatch, "hydra/launcher=submitit_slurm", "experiment=qwen3_8b_curriculum,qwen3_8b_ttt")
    assert not (fake_cluster / "scripts").exists()


# --------------------------------------------------------------------------- the sweep through fake Slurm
MAX_STEPS = 20


@pytest.fixture(scope="module")
def fake_sweep(tmp_path_factory):
    """Two tiny jobs (seeds 0, 1) through submitit_slurm; job 0 is preempted after its first checkpoint."""
    root = tmp_path_factory.mktemp("sweep")
    fake_slurm.install(root / "bin", root / "slurm")
    env = {
        **os.environ,
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "DOMINO_ROOT": str(root),
        "WANDB_MODE": "offline",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "domino_train",
        "-m",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.timeout_min=30",
        "experiment=tiny",
        "seed=0,1",
        "sweep_id=fake",
        "logger=wandb",
        f"trainer.max_steps={MAX_STEPS}",
        "trainer.val_check_interval=5",
        "callbacks.model_checkpoint.every_n_train_steps=5",
        "data.num_rows=32",
        "data.val_size=4",
        "trainer.enable_progress_bar=false",  # and no callbacks.progress_bar=null: the flag alone is enough
    ]
    master = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sweep = root / "artifacts" / "runs" / "multirun" / "fake"
    explain = partial(fake_slurm.describe, root / "slurm")

    def job0_checkpointed() -> bool:
        if master.poll() is not None:
            raise AssertionError(f"the sweep ended before job 0 checkpointed:\n{master.stdout.read()[-3000:]}")
        return (sweep / "0_tiny" / "checkpoints" / "last.ckpt").exists()

    try:
        fake_slurm.wait_for(job0_checkpointed, 240, "job 0's ckpt", explain=explain)
        (script,) = (root / "slurm" / "scripts").glob("*.sh")
        requeue_signal = re.search(r"--signal=(\w+)@", script.read_text()).group(1)
        job0 = next(p.stem for p in (root / "slurm" / "jobs").glob("*_0.json"))
        cancel = [str(root / "bin" / "scancel"), job0, "--signal", requeue_signal]
        subprocess.run(cancel, check=True, env=env)  # preempt: submitit checkpoints and requeues
        output, _ = master.communicate(timeout=300)
    finally:
        if master.poll() is None:
            master.kill()
    assert master.returncode == 0, output[-3000:]
    states = root / "slurm" / "jobs"

    def finished() -> bool:  # the master returns on the result files; the job processes exit just after
        return all(json.loads(p.read_text())["state"] not in ("PENDING", "RUNNING") for p in states.glob("*.json"))

    fake_slurm.wait_for(finished, 60, "the jobs' processes to exit", explain=explain)
    return {"root": root, "sweep": sweep, "script": script, "state": states, "job0": job0}


@pytest.mark.slow
def test_sweep_runs_through_submitit_slurm(fake_sweep):
    lines = set(fake_sweep["script"].read_text().splitlines())
    for line in ("#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --time=30", "#SBATCH --array=0-1%2"):
        assert line in lines, line
    assert re.search(r"^#SBATCH --signal=USR\d@120$", fake_sweep["script"].read_text(), flags=re.M)
    assert not any(line.startswith("#SBATCH --gpus-per-node") for line in lines)  # a CPU trainer
    for job in (0, 1):
        run = fake_sweep["sweep"] / f"{job}_tiny"
        assert (run / "export" / "config.json").is_file() and (run / "csv" / "metrics.csv").is_file()
    states = {p.stem: json.loads(p.read_text()) for p in fake_sweep["state"].glob("*.json")}
    assert sorted((s["state"], s["restarts"]) for s in states.values()) == [("COMPLETED", 0), ("COMPLETED", 1)]


@pytest.mark.slow
def test_requeued_job_resumes_its_folder_step_and_wandb_run(fake_sweep):
    run = fake_sweep["sweep"] / "0_tiny"
    log = "".join(p.read_text() for p in (fake_sweep["sweep"] / ".submitit").glob(f"{fake_sweep['job0']}/*_log.*"))
    assert "this job is preempted" in log and f"resuming from {run}/checkpoints/last.ckpt" in log
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == MAX_STEPS
    attempts = [read_wandb_file(f) for f in offline_run_files(run)]
    assert len(attempts) == 2 and attempts[0].run_id == attempts[1].run_id == "multirun-fake-0_tiny"
    steps = [[row["trainer/global_step"] for row in a.rows if "train/loss" in row] for a in attempts]
    resumed_at = steps[1][0]
    assert resumed_at > 0 and resumed_at % 5 == 0 and resumed_at <= steps[0][-1] + 1  # from a checkpoint
    assert steps[1][-1] == MAX_STEPS - 1
    with open(run / "csv" / "metrics.csv") as f:  # the CSV kept the rows logged before the requeue
        logged = {int(line.split(",")[1]) for line in list(f)[1:]}
    assert logged >= set(range(MAX_STEPS))


@pytest.mark.slow
def test_two_jobs_of_a_multirun_are_two_wandb_runs(fake_sweep):
    runs = [merge([read_wandb_file(f) for f in offline_run_files(fake_sweep["sweep"] / f"{j}_tiny")]) for j in (0, 1)]
    assert [r.run_id for r in runs] == ["multirun-fake-0_tiny", "multirun-fake-1_tiny"]
    assert [r.config["seed"] for r in runs] == [0, 1]
    for r in runs:
        assert r.group == "tiny" and r.job_type == "train" and "tiny-qwen3" in r.tags
        assert r.rows[-1]["trainer/global_step"] == MAX_STEPS - 1 and "max" in r.summary["val/tau_final"]


@pytest.mark.slow
def test_report_over_the_sweep(fake_sweep, capsys):
    out = fake_sweep["root"] / "report"
    assert report_main([str(fake_sweep["sweep"]), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| tiny | 2 (0, 1) | 20 |" in table
    assert (out / "curves.png").stat().st_size > 10_000 and (out / "by_position.png").is_file()
