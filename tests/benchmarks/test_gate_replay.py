"""benchmarks/gate_replay.py: a gate-off run's rounds replayed through `DraftGate`."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gate_replay  # noqa: E402


def _row(method: str, accept: list[int], round_s: list[float], decode_s: float, plain_rounds: int = 0) -> dict:
    stats = {"accept_lengths": accept, "round_s": round_s, "decode_s": decode_s, "plain_rounds": plain_rounds}
    stats["output_tokens"] = 1 + sum(accept)
    row = {"dataset": "sharegpt", "method": method, "prompt_id": "p", "turn": 0, "output_tokens": 1 + sum(accept)}
    return row | {"stats": stats}


def _run(folder: Path, tree: dict) -> Path:
    folder.mkdir()
    ar = _row("ar", [1] * 60, [0.01] * 60, 0.6)  # plain decoding: 100 tokens / s
    (folder / "records.jsonl").write_text(json.dumps([ar, tree]) + "\n")
    return folder


def test_a_gate_keeps_drafting_that_pays_and_stops_drafting_that_loses(tmp_path):
    rows = gate_replay.read_runs(_run(tmp_path / "run", _row("ddtree", [3] * 20, [0.015] * 20, 0.3)))
    ar = rows.pop("ar")
    always, share = gate_replay.replay(rows["ddtree"], ar, None, 1.0)
    assert always == pytest.approx(200.0) and share == 0.0  # 3 tokens in 15 ms
    gated, share = gate_replay.replay(rows["ddtree"], ar, gate_replay.DraftGate(), 1.0)
    assert gated == pytest.approx(200.0) and share == 0.0  # drafting pays: never paused
    losing, share = gate_replay.replay(rows["ddtree"], ar, gate_replay.DraftGate(), 4.0)  # 3 tokens in 60 ms
    assert share > 0.5 and 50.0 < losing < 100.0  # mostly plain, the retries cost the rest


def test_a_run_that_decoded_plain_rounds_is_refused(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path / "run", _row("ddtree", [3] * 20, [0.015] * 20, 0.3, plain_rounds=2))
    monkeypatch.setattr(sys, "argv", ["gate_replay.py", str(run)])
    with pytest.raises(SystemExit, match="draft_gate=false"):
        gate_replay.main()
