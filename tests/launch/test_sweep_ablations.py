"""`launch/sweep_ablations.sh` through hydra-submitit's Slurm launcher on a real one-node Slurm.

The script's grid shrunk to the tiny experiment, two variants (Domino head, no head) and one seed: one sbatch
array of two jobs. Job 0 is preempted after its first checkpoint (submitit's signal, as Slurm sends it before
a time limit): submitit requeues it, and it finishes in the same folder, from that checkpoint, in the same
W&B run. Job 1 finds a truncated `last.ckpt` in its folder and fails: `domino-report` lists it FAILED with its
log. Rerunning the same command resumes only job 1 (job 0 finds nothing left to train).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from domino_train.cli.report import main as report_main
from domino_train.report.wandb_file import offline_run_files, read_wandb_file
from domino_train.run.status import read_status
from slurm_cluster import wait_for

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
# Long enough that job 0 is still training when the test has seen its first checkpoint and suspends it (on a
# quiet machine 16 tiny steps finished before the preemption signal arrived).
MAX_STEPS = 48
# TIMEOUT_MIN 600: however busy the machine, no job nears its time limit (submitit would requeue it)
SHRUNK = {"SWEEP_ID": "abl", "SEEDS": "0", "EXPERIMENTS": "tiny", "TRAINER": "cpu", "TIMEOUT_MIN": "600"}
OVERRIDES = [
    "drafter.head=domino,null",
    "logger=wandb",
    f"trainer.max_steps={MAX_STEPS}",
    "trainer.val_check_interval=4",
    "callbacks.model_checkpoint.every_n_train_steps=4",
    "data.num_rows=32",
    "data.val_size=4",
    "trainer.enable_progress_bar=false",
]


def _sweep(env: dict[str, str]) -> subprocess.Popen:
    cmd = ["bash", str(REPO / "launch" / "sweep_ablations.sh"), *OVERRIDES]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(master: subprocess.Popen) -> str:
    try:
        return master.communicate(timeout=3600)[0]
    finally:
        if master.poll() is None:
            master.kill()


@pytest.fixture(scope="module")
def sweep(slurm, tmp_path_factory):
    """The sweep, run twice; job 0 preempted in the first run, job 1 failing in it."""
    root = tmp_path_factory.mktemp("sweep")
    env = {
        **slurm.env,
        **SHRUNK,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{slurm.env['PATH']}",  # the script's `python`
        "DOMINO_ROOT": str(root),
        "HF_HOME": str(root / "hf"),
        "WANDB_MODE": "offline",
        "OMP_NUM_THREADS": "1",
    }
    folder = root / "artifacts" / "runs" / "multirun" / "abl"
    truncated = folder / "1_tiny" / "checkpoints" / "last.ckpt"
    truncated.parent.mkdir(parents=True)
    truncated.write_bytes(b"PK\x03\x04 truncated by a full disk")
    master = _sweep(env)
    try:

        def job0_checkpointed() -> Path | None:
            if master.poll() is not None:
                raise AssertionError(f"the sweep ended before job 0 checkpointed:\n{master.stdout.read()[-3000:]}")
            jobs = list((folder / ".submitit").glob("*_0"))
            return jobs[0] if jobs and (folder / "0_tiny" / "checkpoints" / "last.ckpt").exists() else None

        job0 = wait_for(job0_checkpointed, 3600, "job 0's first checkpoint", slurm.logs, poll=0.05).name
        # Stopped (SIGSTOP), job 0 cannot finish training before the signal is pending; continued, it handles
        # the signal before its next step.
        job_id = subprocess.run(["squeue", "-h", "-j", job0, "-o", "%A"], env=slurm.env, capture_output=True, text=True)
        listed = subprocess.run(
            ["scontrol", "listpids", job_id.stdout.strip()], env=slurm.env, capture_output=True, text=True
        )
        pids = [int(line.split()[0]) for line in listed.stdout.splitlines()[1:] if line.split()[:1] != ["-1"]]
        assert pids, listed.stdout + listed.stderr
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        (script,) = (folder / ".submitit").glob("*/*_submission.sh")  # one sbatch script per array
        requeue_signal = re.search(r"--signal=(\w+)@", script.read_text()).group(1)
        subprocess.run(["scancel", f"--signal={requeue_signal}", job0], env=slurm.env, check=True)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    except BaseException:
        master.kill()
        raise
    first = _finish(master)
    first_rc = master.returncode
    ckpt0 = torch.load(folder / "0_tiny" / "checkpoints" / "last.ckpt", weights_only=False)["global_step"]
    out = root / "report-first"
    report_first = subprocess.run(
        [sys.executable, "-m", "domino_train.report", str(folder), "--out", str(out)], capture_output=True, text=True
    )
    status1 = read_status(folder / "1_tiny")
    truncated.unlink()  # the operator's fix; then the same command again
    master = _sweep(env)
    second = _finish(master)
    return {
        "root": root,
        "folder": folder,
        "job0": job0,
        "script": script,
        "first": (first_rc, first),
        "second": (master.returncode, second),
        "report_first": report_first,
        "status1": status1,
        "ckpt0_step": ckpt0,
    }


def test_sweep_submits_one_array_and_the_preempted_job_resumes(sweep):
    lines = set(sweep["script"].read_text().splitlines())
    for line in ("#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --time=600", "#SBATCH --array=0-1%2"):
        assert line in lines, line
    assert not any(line.startswith("#SBATCH --gpus-per-node") for line in lines)  # a CPU trainer
    assert len(list((sweep["folder"] / ".submitit").glob("*/*_submission.sh"))) == 2  # one array per run
    run = sweep["folder"] / "0_tiny"
    log = "".join(p.read_text() for p in (sweep["folder"] / ".submitit" / sweep["job0"]).glob("*_log.*"))
    assert "this job is preempted" in log and f"resuming from {run}/checkpoints/last.ckpt" in log
    assert sweep["ckpt0_step"] == MAX_STEPS
    attempts = [read_wandb_file(f) for f in offline_run_files(run)]
    # one W&B run for every attempt; the preempted one may have recorded nothing (Slurm kills it after KillWait)
    assert {a.run_id for a in attempts} - {""} == {"multirun-abl-0_tiny"} and attempts[1].run_id
    resumed = [row["trainer/global_step"] for row in attempts[1].rows if "train/loss" in row]
    assert 0 < resumed[0] < MAX_STEPS and resumed[0] % 4 == 0 and resumed[-1] == MAX_STEPS - 1  # from a checkpoint
    with open(run / "csv" / "metrics.csv") as f:  # the CSV kept the rows logged before the requeue
        logged = {int(line.split(",")[1]) for line in list(f)[1:]}
    assert logged >= set(range(MAX_STEPS))


def test_a_failed_job_is_reported_failed_with_its_log(sweep):
    rc, output = sweep["first"]
    assert rc != 0, output[-3000:]  # the launcher returns every job's result: one failed
    status = sweep["status1"]
    assert status["state"] == "FAILED" and "1_tiny" not in (status["log"] or "-")
    log = Path(status["log"])
    logs = "".join(p.read_text() for p in log.parent.glob("*_log.*"))  # bad input: one line, no traceback
    assert log.is_file() and "domino-train: error: ckpt_path=auto: " in logs and "cannot be read" in logs
    report = sweep["report_first"]
    assert report.returncode == 0, report.stderr[-3000:]
    assert f"| {sweep['folder'] / '1_tiny'} | FAILED | {log} |" in report.stdout, report.stdout
    table, unfinished = report.stdout.split("| unfinished run |")
    assert f"| tiny | 1 (0) | {MAX_STEPS} |" in table  # the finished job alone: one variant, nothing to tell it from
    assert f"{sweep['folder'] / '0_tiny'}" not in unfinished


def test_rerun_resumes_only_the_unfinished_job(sweep, tmp_path):
    rc, output = sweep["second"]
    assert rc == 0, output[-3000:]
    for job in (0, 1):
        assert read_status(sweep["folder"] / f"{job}_tiny")["state"] == "COMPLETED"
    job0 = sweep["folder"] / "0_tiny"
    attempts = [read_wandb_file(f) for f in offline_run_files(job0)]
    trained = [row["trainer/global_step"] for a in attempts[2:] for row in a.rows if "train/loss" in row]
    assert len(attempts) >= 2 and trained == []  # job 0 ran again, resumed at its end, trained nothing
    ckpt1 = torch.load(sweep["folder"] / "1_tiny" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt1["global_step"] == MAX_STEPS
    assert report_main([str(sweep["folder"]), "--out", str(tmp_path)]) == 0
    table = (tmp_path / "report.md").read_text()
    assert (
        f"| tiny (drafter.head=domino) | 1 (0) | {MAX_STEPS} |" in table
        and f"| tiny (drafter.head=null) | 1 (0) | {MAX_STEPS} |" in table
    )
    assert "unfinished run" not in table and (tmp_path / "curves.png").is_file()
