"""benchmarks/verify_cost.py: one column per precision and prepack setting that differs, k rows in AR steps."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import verify_cost  # noqa: E402

from inference.targets.prepacked_linear import prepack_unavailable_reason  # noqa: E402


def _table(monkeypatch, capsys, *args: str) -> list[str]:
    argv = ["verify_cost.py", "--target", "tiny-qwen3", "--prompt", "8", "--k", "1", "3", "--layer-ids", "0", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--repeats", "1", *args])
    verify_cost.main()
    return capsys.readouterr().out.splitlines()


@pytest.mark.skipif(prepack_unavailable_reason("cpu", torch.bfloat16) is not None, reason="no prepacked bf16 linears")
def test_bf16_gets_a_plain_and_a_packed_column_fp32_one(monkeypatch, capsys):
    lines = _table(monkeypatch, capsys, "--dtype", "float32", "bfloat16", "--prepack", "false", "auto")
    header = lines[1]
    assert header.count("AR steps") == 3  # fp32 packs nothing: its two settings are one column
    assert "bfloat16 packed ms" in header and "float32 packed" not in header
    rows = {line.split("|")[0].strip(): line.split("|")[1:] for line in lines[2:]}
    assert set(rows) == {"1", "3"}
    assert all(cell.split()[1] == "1.00" for cell in rows["1"])  # k = 1 is one AR step by definition


def test_an_impossible_prepack_names_why(monkeypatch, capsys):
    with pytest.raises(ValueError, match="bf16 only"):
        _table(monkeypatch, capsys, "--dtype", "float32", "--prepack", "true")
