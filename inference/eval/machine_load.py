"""How busy is the machine: before a run (`free_cores`, for the thread count) and while it was timed?

On a 2-core machine another process that takes a core stalls every two-thread op at its barrier (forwards
5-20x slower), so a timing taken beside one is not a measurement of the method. `LoadMonitor` reads the
kernel's CPU counters (`/proc/stat`) at the start and end of a run and this process's own CPU time, and
reports the share of the machine's CPU time that other processes used and that the hypervisor stole;
`domino-decode` puts it in results.json and warns in results.md when either passes `BUSY_SHARE`.
`free_cores` samples the same counters for a moment before a run and gives the cores no one else is using:
`num_threads: auto` runs on those (measured on 2 EPYC cores with a spinning neighbour: `ar` 7.7 tokens/s on
2 threads, 27.7 on 1; quiet, 38.7 and 23.1), and `choose_wait_policy` picks OpenMP's wait policy from the
same look before torch loads. Linux only (elsewhere nothing is reported and every core counts as free).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

BUSY_SHARE = 0.10  # of all cores' time: more than this taken by others makes a run "busy"
_STAT = Path("/proc/stat")


@dataclass
class _Sample:
    wall: float
    own: float  # this process's CPU seconds
    busy: float  # all CPUs' non-idle seconds
    steal: float
    total: float


def _sample() -> _Sample | None:
    try:
        fields = _STAT.read_text().splitlines()[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]] + [0] * max(0, 9 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
    hz = os.sysconf("SC_CLK_TCK")
    times = os.times()
    total = sum(ticks[:8]) / hz
    return _Sample(
        time.perf_counter(), times.user + times.system, (total * hz - idle - iowait - steal) / hz, steal / hz, total
    )


def cores_taken(sample_s: float = 0.3) -> float | None:
    """Cores other processes kept busy during a `sample_s` look (None off Linux)."""
    start = _sample()
    if start is None:
        return None
    time.sleep(sample_s)
    end = _sample()
    wall = max(end.wall - start.wall, 1e-9)
    return max(end.busy - start.busy - (end.own - start.own), 0.0) / wall


def free_cores(sample_s: float = 0.3) -> int:
    """Cores left over by other processes during a `sample_s` look (at least 1; all of them off Linux)."""
    cores = os.cpu_count() or 1
    taken = cores_taken(sample_s)
    return cores if taken is None else max(1, min(cores, round(cores - taken)))


WAIT_POLICY_CHOICE: str | None = None  # why this process runs the OpenMP wait policy it does (results.json)


def choose_wait_policy(
    environ: MutableMapping[str, str] = os.environ, taken: Callable[[], float | None] = cores_taken
) -> str:
    """Set OpenMP's wait policy from the machine's load before torch loads (libgomp reads it once, then).

    A thread that reaches a barrier first spins (libgomp's default) or sleeps (`PASSIVE`). On a quiet
    machine spinning is what two threads need: `ar` on SmolLM2 ran 38.9-43.0 tokens/s spinning and
    21.9-22.2 passive on 2 Intel Xeon (AMX) cores, no faster than one thread; on 2 AMD EPYC (AVX2) cores
    the two were within noise. Beside a process that takes a core, a spinning thread waits out its
    descheduled sibling at every op: 4.3-7.6 tokens/s, passive 16.5-24.0 (`benchmarks/busy_machine.py`).
    So a quiet machine keeps the default and a busy one (others above `BUSY_SHARE` of its cores) gets
    `PASSIVE`; a policy the user set wins, and nothing is chosen once torch is loaded. A neighbour that
    arrives later is not seen here: results.json then reports the run as busy. Returns the reason, also
    kept in `WAIT_POLICY_CHOICE`."""
    global WAIT_POLICY_CHOICE
    if "OMP_WAIT_POLICY" in environ:
        reason = f"{environ['OMP_WAIT_POLICY']}, as set"
    elif "torch" in sys.modules:
        reason = "libgomp's default (torch was loaded before a policy could be chosen)"
    else:
        cores = os.cpu_count() or 1
        others = taken()
        if others is not None and others > BUSY_SHARE * cores:
            environ["OMP_WAIT_POLICY"] = "PASSIVE"
            reason = f"PASSIVE: other processes kept {others:.1f} of {cores} cores busy at start"
        else:
            load = "" if others is None else f": other processes kept {others:.1f} of {cores} cores busy at start"
            reason = f"libgomp's default (spin){load}"
    WAIT_POLICY_CHOICE = reason
    return reason


class LoadMonitor:
    def __init__(self) -> None:
        self.start = _sample()

    def report(self) -> dict[str, float | bool | str] | None:
        """Shares of the machine's CPU time since the start: others' and stolen; `busy` and a warning."""
        end = _sample()
        if self.start is None or end is None:
            return None
        cores = os.cpu_count() or 1
        wall = max(end.wall - self.start.wall, 1e-9)
        others = max(end.busy - self.start.busy - (end.own - self.start.own), 0.0) / (wall * cores)
        steal = (end.steal - self.start.steal) / max(end.total - self.start.total, 1e-9)
        out: dict[str, float | bool | str] = {
            "other_processes_share": round(others, 3),
            "steal_share": round(steal, 3),
            "busy": others > BUSY_SHARE or steal > BUSY_SHARE,
        }
        if out["busy"]:
            out["warning"] = (
                f"the machine was busy during this run: other processes used {others:.0%} and the hypervisor "
                f"stole {steal:.0%} of its CPU time, so these timings are not a quiet measurement"
            )
        return out
