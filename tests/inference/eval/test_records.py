import json

import pytest

from inference.decoding.stats import GenerationStats
from inference.eval.records import Record, RecordLog


def _record(prompt_id: str, method: str = "ar") -> Record:
    stats = GenerationStats(5, 3, [2, 1], 0.1, 0.2, 0.05, 0.1, 0.01, {"backbone": 0.02})
    return Record("humaneval", method, prompt_id, 0, [1, 2, 3], "length", stats, "abc")


def test_records_round_trip_with_their_stats():
    for r in (_record("a"), Record("mt-bench", "domino", "b", 1, None, None, None, skip_reason="too long")):
        assert Record.from_row(json.loads(json.dumps(r.to_row()))) == r


def test_records_written_before_the_tree_walk_counters_still_load():
    row = _record("a").to_row()
    for key in ("main_steps", "main_accepted", "sibling_steps", "sibling_accepted"):
        del row["stats"][key]
    assert Record.from_row(json.loads(json.dumps(row))) == _record("a")


def test_a_line_cut_short_by_a_stop_is_dropped_and_redone(tmp_path):
    log = RecordLog(tmp_path)
    assert log.start({"seed": 0}) == []
    log.append([_record("a"), _record("a", "domino")])
    log.append([_record("b")])
    with open(log.path, "a") as f:
        f.write('[{"dataset": "humaneval", "meth')  # killed mid-write
    assert [r.prompt_id for r in RecordLog(tmp_path).start({"seed": 0})] == ["a", "a", "b"]
    assert log.path.read_text().endswith("\n")  # the cut line is gone, appends continue cleanly
    log.append([_record("c")])
    assert [r.prompt_id for r in RecordLog(tmp_path).start({"seed": 0})] == ["a", "a", "b", "c"]


def test_a_resume_with_other_settings_is_refused(tmp_path):
    RecordLog(tmp_path).start({"seed": 0, "max_new_tokens": 64})
    RecordLog(tmp_path).append([_record("a")])
    with pytest.raises(ValueError, match=r"max_new_tokens: 64 -> 32.*another hydra.run.dir"):
        RecordLog(tmp_path).start({"seed": 0, "max_new_tokens": 32})
