import json

import pytest

from inference.decoding.stats import GenerationStats
from inference.eval.records import Record
from inference.eval.results import ResultsFileError, markdown, read_results, summarize, write_outputs


def _record(method, prompt_id, tokens, accept_lengths, decode_s, dataset="mt-bench", turn=0):
    stats = GenerationStats(len(tokens), len(tokens), accept_lengths, prefill_s=0.1, decode_s=decode_s)
    stats.draft_s, stats.verify_s, stats.commit_s = 0.2 * decode_s, 0.7 * decode_s, 0.1 * decode_s
    return Record(dataset, method, prompt_id, turn, tokens, "length", stats, text="x")


def _proof(kind: str, margin: float = 0.4) -> dict:
    return {"position": 4, "ar_token": 5, "token": 9, "ar_margin": margin, "kind": kind, "reason": "test"}


def _records(kind="algorithmic"):
    records = [
        _record("ar", "a", [1, 2, 3, 4, 5], [1, 1, 1, 1], 4.0),
        _record("ar", "b", [6, 7, 8], [1, 1], 2.0),
        _record("domino", "a", [1, 2, 3, 4, 5], [3, 1], 1.0),
        _record("domino", "b", [6, 7, 8], [2], 1.0),
        _record("dflash", "a", [1, 2, 3, 4, 9], [4], 1.0),  # differs from ar
        Record("mt-bench", "dflash", "b", 0, None, None, None, skip_reason="too long"),
    ]
    records[0].noise, records[1].noise = 0.5, 0.25  # the run's floor: 0.5
    records[4].divergence = _proof(kind)
    return records


def test_summary_numbers():
    results = summarize(_records(), check_lossless=True)["mt-bench"]
    ar, domino, dflash = results["ar"], results["domino"], results["dflash"]
    assert ar["tau"] == 1.0 and ar["speedup"] == 1.0 and ar["lossless"] is None
    assert domino["tau"] == 2.0 and domino["accept_length_histogram"] == [0, 1, 1, 1]
    assert domino["speedup"] == (6.0 / 8) / (2.0 / 8) and domino["tokens_per_s"] == 4.0
    assert domino["lossless"] is True and domino["divergences"] == {"exact": 2, "numerical": 0, "algorithmic": 0}
    # one differs and was not proven numerical, one is missing
    assert dflash["lossless"] is False and dflash["divergences"] == {"exact": 0, "numerical": 0, "algorithmic": 2}
    assert dflash["noise_floor"] == 0.5 and dflash["max_numerical_gap"] is None
    assert dflash["skipped_prompts"] == 1 and dflash["num_prompts"] == 1 and dflash["num_output_tokens"] == 5
    assert domino["stage_ms_per_round"]["verify"] == 1e3 * 0.7 * 2.0 / 3
    assert summarize(_records(), check_lossless=False)["mt-bench"]["domino"]["lossless"] is None


def test_a_proven_divergence_is_numerical_whatever_the_noise_floor():
    records = [r for r in _records("numerical") if r.prompt_id == "a"]
    records[0].noise = 0.01  # far below the margin: the floor is reported, not judged with
    dflash = summarize(records, check_lossless=True)["mt-bench"]["dflash"]
    assert dflash["divergences"] == {"exact": 0, "numerical": 1, "algorithmic": 0} and dflash["lossless"] is True
    assert dflash["max_numerical_gap"] == 0.4 and dflash["noise_floor"] == 0.01


def test_an_unproven_difference_or_an_own_argmax_violation_is_algorithmic():
    records = _records()
    records[4].divergence = None
    assert summarize(records, check_lossless=True)["mt-bench"]["dflash"]["divergences"]["algorithmic"] == 2
    records = _records()
    records[2].stats.own_argmax_violations = 1  # domino's output equals ar's, but it committed a non-argmax
    domino = summarize(records, check_lossless=True)["mt-bench"]["domino"]
    assert domino["divergences"]["algorithmic"] == 1 and domino["own_argmax_violations"] == 1
    assert "NO (1 / 0 / 1, 1 own-argmax violations)" in markdown(summarize(records, check_lossless=True), "# t")


def test_records_keep_noise_and_divergence_through_the_log():
    for r in _records():
        assert Record.from_row(json.loads(json.dumps(r.to_row()))) == r


def test_files(tmp_path):
    report = write_outputs(tmp_path, _records(), check_lossless=True, meta={"target": "tiny", "temperature": 0.0})
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["results"]["mt-bench"]["domino"]["tau"] == 2.0 and saved["target"] == "tiny"
    assert saved["mean"]["domino"]["speedup"] == report["results"]["mt-bench"]["domino"]["speedup"]
    assert (tmp_path / "plot.png").is_file() == (saved["plot"] == "plot.png")
    rows = [json.loads(line) for line in (tmp_path / "generations.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[-1]["skipped"] == "too long" and rows[2]["accept_lengths"] == [3, 1]
    table = (tmp_path / "results.md").read_text()
    assert (
        "| domino | 3.00x / 2.00 | 3.00x / 2.00 |" in table and "NO (0 / 0 / 2)" in table and "yes (2 / 0 / 0)" in table
    )


def test_markdown_lists_every_dataset():
    records = _records() + [_record("ar", "c", [1, 2], [1], 1.0, dataset="humaneval")]
    table = markdown(summarize(records, check_lossless=True), "# t")
    assert "| method | mt-bench | humaneval | mean |" in table
    assert "| dflash | " in table and "| humaneval | ar |" in table


def test_logged_rounds_give_predicted_against_realised_and_the_draft_sizes():
    records = _records()
    tree = _record("ddtree", "a", [1, 2, 3, 4, 5], [3, 1], 1.0)
    tree.stats.draft_sizes, tree.stats.predicted = [16, 9], [2.5, 1.5]
    tree.stats.main_steps, tree.stats.main_accepted, tree.stats.sibling_steps, tree.stats.sibling_accepted = 4, 3, 5, 1
    s = summarize([*records, tree], check_lossless=True)["mt-bench"]["ddtree"]
    assert s["accepted_after"] == {"main": 0.75, "main_steps": 4, "sibling": 0.2, "sibling_steps": 5}
    assert (
        s["draft_size_histogram"][9] == 1 and s["draft_size_histogram"][16] == 1 and sum(s["draft_size_histogram"]) == 2
    )
    assert s["predicted_tokens_per_round"] == 2.0 and s["realised_tokens_per_round"] == 2.0
    assert summarize(records, check_lossless=True)["mt-bench"]["domino"]["predicted_tokens_per_round"] is None
    table = markdown(summarize([*records, tree], check_lossless=True), "# t")
    assert "| mt-bench | ddtree | 2.00 | 2.00 | 9: 1, 16: 1 | 75% (4) | 20% (5) |" in table


def test_a_set_whose_prompts_were_all_skipped_is_not_called_lossless(tmp_path):
    skipped = [
        Record("humaneval", m, p, 0, None, None, None, skip_reason="too long") for m in ("ar", "domino") for p in "ab"
    ]
    results = summarize(_records() + skipped, check_lossless=True)
    assert results["humaneval"]["domino"]["lossless"] is None and results["mt-bench"]["domino"]["lossless"] is True
    table = markdown(results, "# t")
    assert "| humaneval | domino | - | - | - | 0 | 0 | 2 | - (all 2 prompts skipped) |" in table


def test_the_results_file_reads_back_and_other_files_are_refused(tmp_path):
    write_outputs(tmp_path, _records(), check_lossless=True, meta={"target": "tiny"})
    assert read_results(tmp_path / "results.json")["mean"]["domino"]["tau"] == 2.0
    (tmp_path / "rows.json").write_text(json.dumps({"rows": []}))
    (tmp_path / "broken.json").write_text("{")
    for name, problem in [("missing.json", "does not exist"), ("broken.json", "is not JSON"), ("rows.json", "not a")]:
        with pytest.raises(ResultsFileError, match=f"{problem}.*pass the results.json that domino-decode wrote"):
            read_results(tmp_path / name)
