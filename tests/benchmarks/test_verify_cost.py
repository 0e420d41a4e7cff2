"""benchmarks/verify_cost.py: one column per precision, kernel setting and engine, k rows in AR steps."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import verify_cost  # noqa: E402

from inference.kernels.linear import kernel_unavailable_reason  # noqa: E402


def _table(monkeypatch, capsys, *args: str) -> list[str]:
    argv = ["verify_cost.py", "--target", "tiny-qwen3", "--prompt", "8", "--k", "1", "3", "--layer-ids", "0", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--repeats", "1", *args])
    verify_cost.main()
    return capsys.readouterr().out.splitlines()


def test_one_column_per_precision_kernels_and_engine(monkeypatch, capsys):
    lines = _table(
        monkeypatch, capsys, "--dtype", "float32", "bfloat16", "--prepack", "false", "--engine", "hf", "lean"
    )
    header = lines[1]
    assert header.count("AR steps") == 4
    assert "float32 hf plain ms" in header and "bfloat16 lean plain ms" in header
    rows = {line.split("|")[0].strip(): line.split("|")[1:] for line in lines[2:]}
    assert set(rows) == {"1", "3"}
    assert all(cell.split()[1] == "1.00" for cell in rows["1"])  # k = 1 is one AR step by definition


@pytest.mark.skipif(kernel_unavailable_reason("onednn", "bfloat16") is None, reason="oneDNN bf16 runs here")
def test_an_impossible_prepack_names_why(monkeypatch, capsys):
    with pytest.raises(ValueError, match="prepack=true is not possible here: oneDNN has no bf16"):
        _table(monkeypatch, capsys, "--dtype", "bfloat16", "--prepack", "true")
