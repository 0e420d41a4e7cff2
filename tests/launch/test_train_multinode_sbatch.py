"""`launch/train_multinode.sbatch` on a real one-node Slurm, as documented, with command-line overrides only.

Two tasks on the node (`--ntasks-per-node=2 --gpus-per-node=0`), the tiny experiment on the CPU trainer:
Lightning takes ranks from Slurm (one process per task, nothing spawned), DDP and DeepSpeed ZeRO-2 run on
gloo, and the export loads and decodes losslessly. A third job gets USR1 on its batch shell after its first
checkpoint: the template's trap requeues it under the same job id, and the second attempt resumes from
`last.ckpt` to the export of an uninterrupted run, bit for bit.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from inference import DominoDrafter, tiny_target
from inference.decoding import DecodeOptions, build_decoder
from slurm_cluster import wait_for

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "launch" / "train_multinode.sbatch"
# 10 h: however busy the machine, no job nears its time limit (the template's USR1 would requeue it)
SITE = ["--nodes=1", "--ntasks-per-node=2", "--gpus-per-node=0", "--cpus-per-task=1", "--time=600"]
TINY = [
    "experiment=tiny",
    "trainer.max_steps=16",
    "trainer.val_check_interval=8",
    "callbacks.model_checkpoint.every_n_train_steps=4",
    "data.num_rows=48",
    "data.val_size=8",
    "trainer.enable_progress_bar=false",
]
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


def _sbatch(slurm, root: Path, *overrides: str) -> str:
    env = {**slurm.env, "DOMINO_ROOT": str(root), "HF_HOME": str(root / "hf"), "HYDRA_FULL_ERROR": "1"}
    cmd = ["sbatch", "--parsable", *SITE, f"--output={root}/%x-%j.out", str(TEMPLATE), *TINY, *overrides]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip().split(";")[0]


def _wait_ended(slurm, job: str, log: Path) -> str:
    def tail() -> str:
        return (log.read_text()[-4000:] if log.exists() else "(no log)") + "\n" + slurm.logs()

    return wait_for(lambda: (s := slurm.job_state(job)) in ENDED and s, 3600, f"job {job} to end", tail)


@pytest.fixture(scope="module")
def jobs(slurm, tmp_path_factory):
    """Three jobs of the template: DDP, DeepSpeed ZeRO-2, and DDP again, requeued by USR1 after a checkpoint."""
    if not (REPO / ".venv" / "bin" / "activate").is_file():
        pytest.skip("the template activates the checkout's .venv (make install)")
    root = tmp_path_factory.mktemp("sbatch")
    ids = {"requeued": _sbatch(slurm, root, "strategy=ddp")}  # first: the others queue behind it (2 CPUs each)
    ids |= {
        "ddp": _sbatch(slurm, root, "strategy=ddp"),
        "deepspeed": _sbatch(slurm, root, "strategy=deepspeed_stage_2"),
    }
    run = {name: root / "artifacts" / "runs" / "tiny" / f"slurm-{job}" for name, job in ids.items()}
    log = {name: root / f"domino-{job}.out" for name, job in ids.items()}
    requeued = ids["requeued"]

    def checkpointed() -> bool:
        if slurm.job_state(requeued) in ENDED:
            raise AssertionError(f"job {requeued} ended before its first checkpoint:\n{log['requeued'].read_text()}")
        return (run["requeued"] / "checkpoints" / "last.ckpt").exists()

    wait_for(lambda: slurm.job_state(requeued) != "PENDING", 1800, f"job {requeued} to start", slurm.logs)
    wait_for(checkpointed, 1800, f"job {requeued}'s first checkpoint", slurm.logs)
    subprocess.run(["scancel", "--signal=USR1", "--batch", requeued], env=slurm.env, check=True)
    wait_for(lambda: "Restarts=1" in _show(slurm, requeued), 900, f"job {requeued} to be requeued", slurm.logs)
    states = {name: _wait_ended(slurm, job, log[name]) for name, job in ids.items()}
    restarts = _show(slurm, requeued)
    return {"ids": ids, "run": run, "log": log, "states": states, "restarts": restarts}


def _show(slurm, job: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job], env=slurm.env, capture_output=True, text=True).stdout


def _assert_lossless(export: Path) -> None:
    target = tiny_target()
    drafter = DominoDrafter.from_pretrained(export, target=target)
    assert drafter.head is not None
    for length, seed in ((5, 1), (13, 2)):
        prompt = torch.randint(0, 256, (length,), generator=torch.Generator().manual_seed(seed)).tolist()
        expected = build_decoder("ar", target, options=DecodeOptions()).generate(prompt, 24).tokens
        assert build_decoder("domino", target, drafter, DecodeOptions()).generate(prompt, 24).tokens == expected


@pytest.mark.parametrize("strategy", ["ddp", "deepspeed"])
def test_two_slurm_tasks_train_one_drafter(jobs, strategy):
    log = jobs["log"][strategy].read_text()
    assert jobs["states"][strategy] == "COMPLETED", log[-4000:]
    # one process per Slurm task, ranks from Slurm (Lightning prints one line per rank), none spawned
    members = sorted(re.findall(r"GLOBAL_RANK: (\d), MEMBER: (\d)/(\d)", log))
    assert members == [("0", "1", "2"), ("1", "2", "2")], log[-4000:]
    run = jobs["run"][strategy]
    assert [p.name for p in run.iterdir() if p.name == "export"] == ["export"]  # one export, in the job's folder
    if strategy == "deepspeed":  # ZeRO-2 shards the optimizer states: one shard per rank, both written
        shards = sorted(p.name for p in (run / "checkpoints" / "last.ckpt").rglob("*optim_states.pt"))
        assert len(shards) == 2 and "rank_0" in shards[0] and "rank_1" in shards[1], shards
    _assert_lossless(run / "export")


def test_usr1_requeues_under_the_same_id_and_resumes_to_the_same_export(jobs):
    job, log = jobs["ids"]["requeued"], jobs["log"]["requeued"].read_text()
    assert jobs["states"]["requeued"] == "COMPLETED", log[-4000:]
    assert "Restarts=1" in jobs["restarts"]
    run = jobs["run"]["requeued"]
    # both attempts in the one log (--open-mode=append): the trap, Slurm's requeue, then the resume
    trap = log.index(f"requeueing job {job} (restart 0)")
    assert log.index("DUE TO JOB REQUEUE") > trap
    assert log.index(f"resuming from {run}/checkpoints/last.ckpt") > trap
    reference = load_file(jobs["run"]["ddp"] / "export" / "model.safetensors")
    resumed = load_file(run / "export" / "model.safetensors")
    assert reference.keys() == resumed.keys()
    for name, tensor in reference.items():
        assert torch.equal(tensor, resumed[name]), name
