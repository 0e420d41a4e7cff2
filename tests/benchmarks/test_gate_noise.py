"""benchmarks/gate_noise.py: the gate on simulated rounds whose committed tokens are a coin toss per draft."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gate_noise  # noqa: E402


def test_always_and_never_draft_run_at_the_advantage_they_were_given():
    always, plain = gate_noise.simulate("always", 0.1, rounds=4000)
    assert plain == 0.0 and always == pytest.approx(1.1, rel=0.03)  # plain rounds: 1 token a second
    never, plain = gate_noise.simulate("never", 0.1, rounds=500)
    assert plain == 1.0 and never == pytest.approx(1.0, rel=0.02)


def test_judging_expected_tokens_keeps_drafting_that_pays_and_stops_drafting_that_loses():
    gains, loses = gate_noise.table([0.1, -0.15], seeds=3, rounds=2000)
    assert gains["expected plain"] < 0.1 and gains["expected"] > 0.98
    assert gains["committed plain"] > gains["expected plain"]  # unlucky probes shut the other gate
    assert loses["expected plain"] > 0.85 and loses["expected"] > 0.97


def test_main_prints_one_row_per_advantage(capsys):
    assert gate_noise.main(["--advantages", "0", "--seeds", "1", "--rounds", "200"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].startswith("| +0% |")
