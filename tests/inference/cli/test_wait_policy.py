"""The inference CLIs run OpenMP's passive wait policy unless the user chose one: the package sets it before
anything imports torch (libgomp reads it once, at load), which needs `import inference` to stay lazy."""

import os
import subprocess
import sys

PROBE = (
    "import os, sys, inference.cli; torched = 'torch' in sys.modules; import inference.cli.decode; "
    "print(torched, os.environ['OMP_WAIT_POLICY'])"
)


def _probe(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_clis_set_passive_before_torch_loads():
    assert _probe() == "False PASSIVE"


def test_a_policy_the_user_set_wins():
    assert _probe(OMP_WAIT_POLICY="ACTIVE") == "False ACTIVE"
