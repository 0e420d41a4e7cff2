"""A real one-node Slurm for tests: munged, slurmctld and slurmd started from a temporary folder.

`SlurmCluster(folder).start()` writes a key, a `slurm.conf` (this host's short name, `CPUs=` its cores,
linuxproc process tracking, no task plugin, cons_tres, no accounting) and runs the three daemons as root
with their pid files, sockets, logs, state and spool under `folder`, on free ports; `stop()` ends them by
their pid files. Nothing is written outside `folder`. Client commands find this cluster through
`SLURM_CONF` (see `env`).

Requeued jobs wait `cred_expire + 1` seconds before they are eligible again (120 s by default): the
conf shortens it, and lets the backfill scheduler look every second, so that a requeue takes seconds.
Without accounting (no slurmdbd) `sacct` answers an error: submitit then follows its jobs by their
result files, which every job that ends in Python writes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scancel", "scontrol", "squeue", "sinfo", "mungekey")


def unavailable() -> str | None:
    """Why a one-node Slurm cannot run here (None: it can)."""
    missing = [b for b in (*DAEMONS, *CLIENTS) if shutil.which(b, path=f"{os.environ['PATH']}:/usr/sbin:/sbin") is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing: apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "starting slurmctld / slurmd needs root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, explain=None, poll: float = 0.5):
    """Poll `predicate()` until it returns something truthy; raise TimeoutError (with `explain()`) after
    `timeout` seconds. Timeouts here only catch hangs: they are many times the expected durations."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"gave up waiting {timeout:.0f} s for {what}" + (f"\n{explain()}" if explain else ""))


class SlurmCluster:
    """One node (this machine) in one partition, `debug`, run from `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.conf = self.folder / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's client commands (and the jobs they submit)."""
        sbin = "/usr/sbin:/sbin"
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": f"{os.environ['PATH']}:{sbin}"}

    def _write_conf(self) -> None:
        f = self.folder
        lines = [
            "ClusterName=domino-test",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={f / 'munge.socket'},cred_expire=10",
            f"StateSaveLocation={f / 'state'}",
            f"SlurmdSpoolDir={f / 'spool'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}",
            f"SlurmdPidFile={f / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'slurmctld.log'}",
            f"SlurmdLogFile={f / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=86400",  # `scontrol show job` keeps ended jobs (the tests read their state and restarts)
            "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=1",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 120) -> SlurmCluster:
        """Start the three daemons and wait until the node takes jobs."""
        f = self.folder
        for d in ("state", "spool"):
            (f / d).mkdir(parents=True, exist_ok=True)
        self._write_conf()
        env = self.env
        subprocess.run(["mungekey", "--create", "--keyfile", str(f / "munge.key")], check=True, env=env)
        munged = [
            "munged",
            "--force",  # pytest's folders are private (0700), which munged refuses for a socket unless forced
            f"--key-file={f / 'munge.key'}",
            f"--socket={f / 'munge.socket'}",
            f"--pid-file={f / 'munged.pid'}",
            f"--log-file={f / 'munged.log'}",
            f"--seed-file={f / 'munged.seed'}",
        ]
        for cmd in (munged, ["slurmctld"], ["slurmd"]):  # each forks into the background and writes its pid file
            subprocess.run(cmd, check=True, env=env, stdin=subprocess.DEVNULL, capture_output=True)
        state = ["sinfo", "--noheader", "--nodes", self.node, "--format=%t"]
        wait_for(
            lambda: subprocess.run(state, env=env, capture_output=True, text=True).stdout.strip() == "idle",
            timeout,
            f"node {self.node} to be idle",
            self.logs,
        )
        return self

    def _pid(self, daemon: str) -> int | None:
        path = self.folder / f"{daemon}.pid"
        try:
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self, timeout: float = 300) -> None:
        """Cancel what is left of the jobs and wait for them, end the daemons by their pid files (slurmd
        first), then kill any process still carrying this cluster's `SLURM_CONF` (a job step that outlived
        slurmd, a job's own processes): nothing of it is left running."""
        if self._pid("slurmctld"):
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True)
            queue = ["squeue", "--noheader", "--format=%i"]
            try:
                wait_for(
                    lambda: not subprocess.run(queue, env=self.env, capture_output=True, text=True).stdout.strip(),
                    timeout,
                    "the cancelled jobs to end",
                )
            except TimeoutError:
                pass  # end the daemons all the same, and what is left below
        for daemon in reversed(DAEMONS):
            pid = self._pid(daemon)
            if pid is not None and _signal(pid, signal.SIGTERM) and not _ended(pid, timeout):
                _signal(pid, signal.SIGKILL)
        for pid in self.processes():
            _signal(pid, signal.SIGKILL)

    def processes(self) -> list[int]:
        """Pids of the processes this cluster started, and of its jobs: `SLURM_CONF` names its conf in their
        environment (the daemons and the jobs inherit it from `env`)."""
        marker = f"SLURM_CONF={self.conf}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile, or not readable
                continue
        return found

    def logs(self, tail: int = 20) -> str:
        """The last lines of each daemon's log: what a timed-out wait should print."""
        parts = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.folder / name
            text = path.read_text().splitlines()[-tail:] if path.exists() else ["(none)"]
            parts.append(f"--- {name}\n" + "\n".join(text))
        return "\n".join(parts)

    def job_state(self, job: str) -> str:
        """`JobState` from `scontrol show job` ('' once the controller has forgotten the job)."""
        out = subprocess.run(["scontrol", "show", "job", job], env=self.env, capture_output=True, text=True).stdout
        return next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "")


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _ended(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False
