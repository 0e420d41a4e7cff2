"""benchmarks/train_step.py: blocks/s, the split of a step, and with --profile the GEMM rate against the
machine's, on the tiny experiment."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_step  # noqa: E402


def test_the_step_is_split_and_its_matrix_products_rated(monkeypatch, capsys):
    argv = ["train_step.py", "experiment=tiny", "trainer.precision=32-true", "--seq-len", "64", "--repeats", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--profile"])
    train_step.main()
    out = capsys.readouterr().out
    assert re.search(r"step \d+ ms  ->  [\d.]+ blocks/s", out)
    shares = [float(m) for m in re.findall(r"ms\s+([\d.]+) %", out.split("ops by self time")[0])]
    assert len(shares) == 3  # lm_head, draft layers, the rest (timed apart: their sum is an estimate)
    assert "aten::mm" in out
    rates = re.search(r"GFLOP per step at (\d+) GFLOP/s .*this machine: (\d+) GFLOP/s", out)
    assert rates and int(rates.group(1)) > 0 and int(rates.group(2)) > 0
