#!/usr/bin/env bash
# The GPU proof in one command: every CUDA code path checked, the papers' figures timed (docs/gpu.md).
#   bash benchmarks/gpu_check.sh OUT_DIR             # on one CUDA GPU, within 8 minutes
#   bash benchmarks/gpu_check.sh OUT_DIR --dry-run   # tiny shapes on the CPU: the script itself still works
# Writes OUT_DIR/summary.json and OUT_DIR/summary.md; exits 0 only when no stage failed.
# PYTHON picks the interpreter (default: the checkout's .venv if there is one, else python3).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: bash benchmarks/gpu_check.sh OUT_DIR [--dry-run] [--stages NAME ...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$root/.venv/bin/python" ]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi
cd "$root"
exec "$PYTHON" benchmarks/gpu_check.py "$@"
