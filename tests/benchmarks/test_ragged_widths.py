"""benchmarks/ragged_widths.py: one row per layout, one column per context, layouts checked first."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import ragged_widths  # noqa: E402


def _run(monkeypatch, *layouts: str) -> None:
    argv = ["ragged_widths.py", "--target", "tiny-qwen3", "--dtype", "float32", "--contexts", "6", "12"]
    monkeypatch.setattr(sys, "argv", [*argv, "--layer-ids", "0", "1", "--repeats", "1", "--layouts", *layouts])
    ragged_widths.main()


def test_every_layout_is_timed_after_every_context(monkeypatch, capsys):
    _run(monkeypatch, "2,2", "3,1")
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "| widths | real tokens | after 6 cached | after 12 cached |"
    rows = [line.split("|")[1:-1] for line in lines[3:]]
    assert [r[0].strip() for r in rows] == ["2, 2", "3, 1"] and all(r[1].strip() == "4" for r in rows)
    assert all(float(cell.split()[0]) > 0 for r in rows for cell in r[2:])


def test_layouts_of_other_row_counts_are_refused(monkeypatch):
    with pytest.raises(SystemExit):
        _run(monkeypatch, "2,2", "3,1,1")
