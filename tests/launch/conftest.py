"""Stub commands for the launch scripts' tests."""

import sys
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
