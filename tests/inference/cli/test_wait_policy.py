"""The inference CLIs choose OpenMP's wait policy from the machine's load before anything imports torch
(libgomp reads it once, at load), which needs `import inference` to stay lazy; a policy the user set wins."""

import os
import subprocess
import sys

from inference.eval import machine_load
from inference.eval.machine_load import choose_wait_policy

PROBE = (
    "import os, sys, inference.cli; torched = 'torch' in sys.modules; import inference.cli.decode; "
    "from inference.eval import machine_load; print(torched, os.environ.get('OMP_WAIT_POLICY'), '|', "
    "machine_load.WAIT_POLICY_CHOICE)"
)


def _probe(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_clis_choose_before_torch_loads():
    torched, policy, _, reason = _probe().split(" ", 3)
    assert torched == "False"
    assert (policy, reason.split(":")[0]) in {("PASSIVE", "PASSIVE"), ("None", "libgomp's default (spin)")}


def test_a_policy_the_user_set_wins():
    assert _probe(OMP_WAIT_POLICY="ACTIVE") == "False ACTIVE | ACTIVE, as set"


def test_a_busy_machine_gets_passive_and_a_quiet_one_keeps_the_spin(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as if torch were not loaded yet; restored after the test
    cores = os.cpu_count() or 1
    busy: dict[str, str] = {}
    assert choose_wait_policy(busy, taken=lambda: 0.5 * cores).startswith("PASSIVE: other processes kept")
    assert busy == {"OMP_WAIT_POLICY": "PASSIVE"} and machine_load.WAIT_POLICY_CHOICE.startswith("PASSIVE")
    quiet: dict[str, str] = {}
    assert choose_wait_policy(quiet, taken=lambda: 0.0).startswith("libgomp's default (spin)") and not quiet
    assert choose_wait_policy({}, taken=lambda: None) == "libgomp's default (spin)"  # no /proc/stat


def test_nothing_is_chosen_once_torch_is_loaded():
    import torch  # noqa: F401

    environ: dict[str, str] = {}
    assert "torch was loaded" in choose_wait_policy(environ, taken=lambda: 2.0) and not environ
