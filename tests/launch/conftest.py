"""Stub commands for the launch scripts' tests."""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# A domino-decode that logs its arguments and writes a one-row results.json into its hydra.run.dir.
DECODE_STUB = """#!/usr/bin/env bash
echo "$*" >> "{log}"
for arg in "$@"; do [[ $arg == hydra.run.dir=* ]] && dir=${{arg#hydra.run.dir=}}; done
mkdir -p "$dir"
echo '{{"results": {{"sharegpt": {{"ar": {{"speedup": 1.0}}}}}}, "mean": {{}}}}' > "$dir/results.json"
"""


@pytest.fixture
def decode_bin(tmp_path: Path) -> Path:
    """A BIN folder with the stub domino-decode (logging to tmp_path/calls.log) and this interpreter as python."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "domino-decode").write_text(DECODE_STUB.format(log=tmp_path / "calls.log"))
    (bin_dir / "python").write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" "$@"\n')
    for name in ("domino-decode", "python"):
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.fixture
def decode_calls(tmp_path: Path, decode_bin: Path) -> Callable[..., list[str]]:
    """Run a launch script with the stub domino-decode; returns the stub's calls (one line of arguments each)."""

    def run(script: str, **env: str) -> list[str]:
        log = tmp_path / "calls.log"
        log.unlink(missing_ok=True)
        full_env = {**os.environ, "BIN": str(decode_bin), **env}
        path = Path(__file__).parents[2] / "launch" / script
        subprocess.run(["bash", str(path)], check=True, env=full_env, capture_output=True, text=True)
        return log.read_text().splitlines() if log.exists() else []

    return run
