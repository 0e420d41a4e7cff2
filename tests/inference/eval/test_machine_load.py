"""`LoadMonitor`: the share of CPU time other processes used during a run, from /proc/stat."""

import os
import subprocess
import sys
import time

import pytest

from inference.eval import machine_load
from inference.eval.machine_load import LoadMonitor


def _stat(busy: int, idle: int, steal: int = 0) -> str:
    return f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n"


def test_others_cpu_time_and_steal_are_shares_of_the_machine(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(machine_load, "_STAT", stat)
    monkeypatch.setattr(machine_load.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(machine_load.os, "sysconf", lambda name: 100)
    clock = iter([0.0, 10.0])
    monkeypatch.setattr(machine_load.time, "perf_counter", lambda: next(clock))
    own = iter([0.0, 5.0])
    monkeypatch.setattr(machine_load.os, "times", lambda: type("T", (), {"user": next(own), "system": 0.0})())
    stat.write_text(_stat(busy=0, idle=0))
    monitor = LoadMonitor()
    stat.write_text(_stat(busy=1500, idle=400, steal=100))  # 15 s busy: 5 ours, 10 others' of 20 core-s
    report = monitor.report()
    assert report["other_processes_share"] == 0.5 and report["steal_share"] == 0.05
    assert report["busy"] and "other processes used 50%" in report["warning"]


@pytest.mark.skipif(not machine_load._STAT.is_file(), reason="no /proc/stat")
def test_a_spinning_neighbour_is_seen():
    monitor = LoadMonitor()
    neighbour = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<1.5: pass"])
    neighbour.wait()
    time.sleep(0.1)
    assert monitor.report()["other_processes_share"] * os.cpu_count() > 0.4  # 1.5 core-s of ~1.6 s


def test_free_cores_leaves_out_the_cores_others_keep_busy(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(machine_load, "_STAT", stat)
    monkeypatch.setattr(machine_load.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(machine_load.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(machine_load.os, "times", lambda: type("T", (), {"user": 0.0, "system": 0.0})())
    clock = iter([0.0, 1.0, 0.0, 1.0])
    monkeypatch.setattr(machine_load.time, "perf_counter", lambda: next(clock))
    samples = iter([_stat(busy=0, idle=0), _stat(busy=95, idle=105), _stat(busy=0, idle=0), _stat(busy=5, idle=195)])
    monkeypatch.setattr(machine_load.time, "sleep", lambda s: stat.write_text(next(samples)))
    stat.write_text(next(samples))
    assert machine_load.free_cores() == 1  # a neighbour kept one core busy
    stat.write_text(next(samples))
    assert machine_load.free_cores() == 2
