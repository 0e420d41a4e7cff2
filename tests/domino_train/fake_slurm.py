"""A fake Slurm for tests: `sbatch`, `srun`, `sacct`, `scancel` and `scontrol requeue` on one machine.

`install(bin_dir, state_dir)` writes the five commands into `bin_dir` (put it first on PATH). State lives in
`state_dir`: `scripts/<job>.sh` (every submitted script, for asserting its #SBATCH lines), `jobs/<key>.json`
(state, srun pids, restarts; key = `<job>` or `<array job>_<task>`), `next_id`.

- `sbatch SCRIPT` reads the #SBATCH lines, starts every array task as a detached runner (its own session,
  stdio on /dev/null: submitit reads sbatch's output to EOF, so an inherited pipe would block it forever)
  and prints `Submitted batch job N`. With FAKE_SLURM_REFUSE set it records the script and fails.
- The runner sets the job's SLURM_* variables, runs the script with bash, and runs it again when the job
  was requeued meanwhile (`scontrol requeue`), with SLURM_RESTART_COUNT + 1: the same job id, as Slurm.
- `srun CMD` starts SLURM_NTASKS copies of CMD (SLURM_PROCID / SLURM_LOCALID set, --output / --error
  patterns %j %A %a %t expanded), forwards USR1, USR2 and TERM to them, and exits with the worst status.
- `sacct` prints `JobID|State|NodeList` rows; `scancel KEY [--signal SIG]` signals the job's tasks (no
  signal: TERM and state CANCELLED).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

COMMANDS = ("sbatch", "srun", "sacct", "scancel", "scontrol")


def install(bin_dir: Path, state_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        path = bin_dir / name
        path.write_text(
            f"#!/bin/sh\nFAKE_SLURM_DIR={shlex.quote(str(state_dir))} "
            f'exec {shlex.quote(sys.executable)} {shlex.quote(__file__)} {name} "$@"\n'
        )
        path.chmod(0o755)


def _state() -> Path:
    return Path(os.environ["FAKE_SLURM_DIR"])


def _job_file(key: str) -> Path:
    return _state() / "jobs" / f"{key}.json"


def _read(key: str) -> dict:
    return json.loads(_job_file(key).read_text())


def _update(key: str, **changes) -> None:
    path = _job_file(key)
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(changes)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _next_id(count: int) -> int:
    path = _state() / "next_id"
    first = int(path.read_text()) if path.exists() else 1000
    path.write_text(str(first + count + 1))
    return first


def _expand(pattern: str, env: dict[str, str], task: int) -> str:
    job = env.get("SLURM_JOB_ID", "0")
    return (
        pattern.replace("%A", env.get("SLURM_ARRAY_JOB_ID", job))
        .replace("%a", env.get("SLURM_ARRAY_TASK_ID", "0"))
        .replace("%j", job)
        .replace("%t", str(task))
    )


def sbatch(args: list[str]) -> int:
    script = Path(args[-1])
    text = script.read_text()
    flags = dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(.*))?$", text, flags=re.M))
    array = flags.get("array")
    tasks = range(int(array.split("%")[0].split("-")[1]) + 1) if array else [None]
    job = _next_id(len(tasks))
    (_state() / "scripts").mkdir(exist_ok=True)
    (_state() / "scripts" / f"{job}.sh").write_text(text)
    if os.environ.get("FAKE_SLURM_REFUSE"):
        print("sbatch: error: FAKE_SLURM_REFUSE is set (script recorded, nothing run)", file=sys.stderr)
        return 1
    (_state() / "jobs").mkdir(exist_ok=True)
    nodes, per_node = int(flags.get("nodes", 1)), int(flags.get("ntasks-per-node", 1))
    for i, task in enumerate(tasks):
        key = f"{job}_{task}" if task is not None else str(job)
        env = {
            "SLURM_JOB_ID": str(job + 1 + i) if task is not None else str(job),
            "SLURM_JOB_NAME": flags.get("job-name", "fake"),
            "SLURM_NNODES": str(nodes),
            "SLURM_JOB_NUM_NODES": str(nodes),
            "SLURM_NTASKS": str(nodes * per_node),
            "SLURM_NTASKS_PER_NODE": str(per_node),
            "SLURM_JOB_NODELIST": "localhost",
            "SLURM_NODELIST": "localhost",
            "SLURM_SUBMIT_DIR": os.getcwd(),
            "FAKE_SLURM_KEY": key,
        }
        if task is not None:
            env |= {"SLURM_ARRAY_JOB_ID": str(job), "SLURM_ARRAY_TASK_ID": str(task)}
        outputs = {"output": _expand(flags.get("output", "slurm-%j.out"), env, 0)}
        outputs["error"] = _expand(flags.get("error", outputs["output"]), env, 0)
        _update(key, state="PENDING", env=env, script=str(script), restarts=0, pids=[], **outputs)
        subprocess.Popen(
            [sys.executable, __file__, "_run", key],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    print(f"Submitted batch job {job}")
    return 0


def _run(args: list[str]) -> int:
    key = args[0]
    try:
        return _run_until_done(key)
    except BaseException:  # stdio is /dev/null: leave the reason where sacct and the tests can see it
        _update(key, state="FAILED", runner_error=traceback.format_exc())
        raise


def _run_until_done(key: str) -> int:
    while True:
        job = _read(key)
        env = {**os.environ, **job["env"], "SLURM_RESTART_COUNT": str(job["restarts"])}
        _update(key, state="RUNNING")
        # submitit makes the job's log folder only once sbatch has printed the job id, which can be after
        # this runner starts; real Slurm starts jobs later than that.
        for log in (job["output"], job["error"]):
            Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(job["output"], "a") as out, open(job["error"], "a") as err:
            rc = subprocess.run(["bash", job["script"]], env=env, stdout=out, stderr=err).returncode
        job = _read(key)
        if job.get("requeue"):
            _update(key, requeue=False, restarts=job["restarts"] + 1, state="PENDING")
            continue
        if job["state"] != "CANCELLED":
            _update(key, state="COMPLETED" if rc == 0 else "FAILED", rc=rc)
        return rc


def srun(args: list[str]) -> int:
    options: dict[str, str] = {}
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag in ("--output", "--error"):
            options[flag[2:]] = args.pop(0)
    env = dict(os.environ)
    procs = []
    for task in range(int(env.get("SLURM_NTASKS", "1"))):
        task_env = env | {"SLURM_PROCID": str(task), "SLURM_LOCALID": str(task), "SLURM_NODEID": "0"}
        out = open(_expand(options.get("output", "/dev/stdout"), env, task), "a")
        err = open(_expand(options.get("error", options.get("output", "/dev/stderr")), env, task), "a")
        procs.append(subprocess.Popen(args, env=task_env, stdout=out, stderr=err))
    key = env.get("FAKE_SLURM_KEY")
    if key:
        _update(key, pids=[p.pid for p in procs])
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: [p.send_signal(s) for p in procs if p.poll() is None])
    codes = [p.wait() for p in procs]
    return max(codes, key=abs)


def sacct(args: list[str]) -> int:
    wanted = {args[i + 1] for i, a in enumerate(args) if a == "-j"}
    print("JobID|State|NodeList")
    for path in sorted((_state() / "jobs").glob("*.json")):
        key = path.stem
        if key.split("_")[0] in wanted:
            print(f"{key}|{_read(key)['state']}|localhost")
    return 0


def scancel(args: list[str]) -> int:
    key = args[0]
    sig = args[args.index("--signal") + 1] if "--signal" in args else None
    job = _read(key)
    for pid in job["pids"]:
        try:
            os.kill(pid, getattr(signal, sig if (sig or "TERM").startswith("SIG") else f"SIG{sig or 'TERM'}"))
        except ProcessLookupError:
            pass
    if sig is None:
        _update(key, state="CANCELLED")
    return 0


def scontrol(args: list[str]) -> int:
    if args[:1] != ["requeue"]:
        print(f"fake scontrol: unsupported {args}", file=sys.stderr)
        return 1
    _update(args[1], requeue=True)
    return 0


def describe(state_dir: Path) -> str:
    """Every job's state (and a runner's traceback, if it died): what a timed-out test should print."""
    lines = []
    for path in sorted((state_dir / "jobs").glob("*.json")):
        job = json.loads(path.read_text())
        lines.append(f"{path.stem}: {job['state']} restarts={job['restarts']} pids={job['pids']}")
        if "runner_error" in job:
            lines.append(job["runner_error"])
    return "\n".join(lines) or "no job was submitted"


def wait_for(predicate, timeout: float, what: str, poll: float = 0.05, explain=None):
    """Poll `predicate()` until it returns something truthy; fail the test after `timeout` seconds.

    `explain()`, if given, is appended to the failure: the state that shows why the wait never ended.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    detail = f"\n{explain()}" if explain else ""
    raise TimeoutError(f"gave up waiting {timeout:.0f} s for {what}{detail}")


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    handlers = {"sbatch": sbatch, "srun": srun, "sacct": sacct, "scancel": scancel, "scontrol": scontrol, "_run": _run}
    sys.exit(handlers[command](rest))
