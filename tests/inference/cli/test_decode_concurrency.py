"""`domino-decode concurrency=...`: every method at several concurrencies, compared token for token."""

import json

import pytest
import torch
from hydra import compose, initialize_config_dir

from domino_conf import CONF_DIR
from inference.cli import decode
from inference.eval.records import RecordLog

QUICK = ["target=tiny", "max_new_tokens=12", "warmup_tokens=4", "progress=false"]


@pytest.fixture
def drafter_path(qwen_target, trained_drafter, tmp_path):
    drafter, _ = trained_drafter(qwen_target)  # the same weights as the `target=tiny` the CLI loads
    return drafter.save_pretrained(tmp_path / "drafter", dtype=torch.float32)


def _cfg(*overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("decode", overrides=[*QUICK, *overrides])


def _rows(run_dir):
    with open(run_dir / "generations.jsonl") as f:
        return [json.loads(line) for line in f]


def test_every_arm_at_every_concurrency_emits_its_batch_1_tokens(drafter_path, tmp_path):
    overrides = ["methods=[ar,domino,dominotree]", "bench=[mt-bench:3,humaneval:3]", "tree.budget=4"]
    report = decode.run(_cfg(f"drafter_path={drafter_path}", *overrides, "concurrency=[1,2,4]"), tmp_path)
    rows = _rows(tmp_path)
    alone = {
        (r["dataset"], r["method"], r["prompt_id"], r["turn"]): r["tokens"] for r in rows if "concurrency" not in r
    }
    batched = [r for r in rows if "concurrency" in r]
    assert len(batched) == 2 * len(alone) and {r["concurrency"] for r in batched} == {2, 4}
    for r in batched:  # mixed prompt lengths; sequences finish at different times (12 tokens or a stop)
        assert r["tokens"] == alone[(r["dataset"], r["method"], r["prompt_id"], r["turn"])], r["prompt_id"]
    for dataset, arms in report["results"].items():
        assert list(arms) == [f"{m}{level}" for level in ("", "@2", "@4") for m in ("ar", "domino", "dominotree")]
        for arm, s in arms.items():
            assert s["throughput_tok_s"] > 0 and s["latency_s_p50"] > 0 and s["speedup"] > 0
            assert s["decode_tok_s"] > 0 and s["decode_speedup"] > 0
            assert s["lossless"] is (None if arm == "ar" else True), (dataset, arm)
            assert s["divergences"] is None or s["divergences"]["exact"] == s["num_generations"]
        assert arms["ar@4"]["speedup"] == 1.0 and 0 < arms["dominotree@2"]["mean_draft_size"] <= 4
    levels = report["concurrency"]["humaneval"]["domino"]
    assert sorted(int(n) for n in levels) == [1, 2, 4]
    assert (tmp_path / "concurrency.png").is_file() == (report.get("concurrency_plot") is not None)
    assert "| humaneval | dominotree | 4 |" in (tmp_path / "results.md").read_text()


def test_cost_aware_arms_run_at_every_concurrency_and_report_their_batch_curves(drafter_path, tmp_path):
    overrides = ["methods=[ar,domino,dominotree]", "bench=[humaneval:3]", "chain.window=auto", "tree.budget=auto"]
    report = decode.run(
        _cfg(f"drafter_path={drafter_path}", *overrides, "tree.max_budget=8", "concurrency=[1,2]"), tmp_path
    )
    for arm in ("domino", "dominotree", "domino@2", "dominotree@2"):
        assert report["results"]["humaneval"][arm]["lossless"] is True, arm
    for method in ("domino", "dominotree"):
        costs = json.loads((tmp_path / "results.json").read_text())["cost_model"][method]
        curve, cap = costs["batch_verify_curves"]["2"], costs["batch_draft_caps"]["2"]
        assert curve["windows"][0] == 2 and len(curve["windows"]) == len(curve["seconds"]) > 1
        assert cap["moves"][0] == 2 and cap["cap"] == cap["moves"][-1]  # the cap on a row's drafts, as it climbed


def test_a_batched_run_resumes_by_method_and_turn(drafter_path, tmp_path, monkeypatch):
    overrides = [f"drafter_path={drafter_path}", "methods=[ar,domino]", "bench=[mt-bench:2]", "concurrency=2"]
    whole = decode.run(_cfg(*overrides), tmp_path / "whole")
    run_dir, appended = tmp_path / "stopped", []
    real_append = RecordLog.append

    def unit(records):
        return records[0].method, records[0].turn, records[0].concurrency

    def stop_after_four(self, records):
        if len(appended) == 4:
            raise KeyboardInterrupt
        appended.append(unit(records))
        real_append(self, records)

    monkeypatch.setattr(RecordLog, "append", stop_after_four)
    with pytest.raises(KeyboardInterrupt):
        decode.run(_cfg(*overrides), run_dir)
    monkeypatch.setattr(RecordLog, "append", lambda self, rs: [appended.append(unit(rs)), real_append(self, rs)])
    resumed = decode.run(_cfg(*overrides), run_dir)
    # Batch-1 ar per prompt first (the lossless check's reference), then the batched units by method and turn;
    # turn 1 once, after the stop.
    batch1 = [("ar", 0, 1), ("ar", 0, 1)]
    assert appended == [*batch1, ("ar", 0, 2), ("domino", 0, 2), ("ar", 1, 2), ("domino", 1, 2)]
    keys = ("method", "prompt_id", "turn", "tokens")
    assert [[r[k] for k in keys] for r in _rows(tmp_path / "whole")] == [[r[k] for k in keys] for r in _rows(run_dir)]
    assert (
        resumed["results"]["mt-bench"]["domino@2"]["lossless"] is whole["results"]["mt-bench"]["domino@2"]["lossless"]
    )


def test_methods_take_turns_wave_by_wave_and_emit_what_they_emit_in_one_batch(drafter_path, tmp_path, monkeypatch):
    overrides = [f"drafter_path={drafter_path}", "methods=[ar,domino]", "bench=[humaneval:5]", "concurrency=2"]
    one_batch = decode.run(_cfg(*overrides, "interleave=0"), tmp_path / "one")
    units, real_append = [], RecordLog.append

    def note(self, records):
        batch = [r.batch for r in records if r.batch]
        units.append((records[0].method, records[0].concurrency, len(records), batch[0]["id"] if batch else None))
        real_append(self, records)

    monkeypatch.setattr(RecordLog, "append", note)
    waves = decode.run(_cfg(*overrides, "interleave=1"), tmp_path / "waves")
    batched = [u for u in units if u[1] == 2]  # waves of 1 x 2 prompts: 2, 2, 1; every method per wave
    assert batched == [  # every other wave in reverse order
        ("ar", 2, 2, "ar/turn0/wave0"),
        ("domino", 2, 2, "domino/turn0/wave0"),
        ("domino", 2, 2, "domino/turn0/wave1"),
        ("ar", 2, 2, "ar/turn0/wave1"),
        ("ar", 2, 1, "ar/turn0/wave2"),
        ("domino", 2, 1, "domino/turn0/wave2"),
    ]
    keys = ("method", "prompt_id", "turn", "tokens")
    rows = sorted([r[k] for k in keys] for r in _rows(tmp_path / "one"))
    assert rows == sorted([r[k] for k in keys] for r in _rows(tmp_path / "waves"))
    for report in (one_batch, waves):
        assert report["results"]["humaneval"]["domino@2"]["lossless"]


def test_sizes_of_one_method_are_arms_of_one_run(drafter_path, tmp_path):
    overrides = ["methods=[ar,dominotree,dominotree/2,domino/1]", "bench=[humaneval:3]", "tree.budget=auto"]
    report = decode.run(
        _cfg(f"drafter_path={drafter_path}", *overrides, "tree.max_budget=8", "concurrency=[1,2]"), tmp_path
    )
    arms = report["results"]["humaneval"]
    assert list(arms) == [
        f"{m}{level}" for level in ("", "@2") for m in ("ar", "dominotree", "dominotree/2", "domino/1")
    ]
    for level in ("", "@2"):  # the largest draft size a round verified: the arm's own
        assert len(arms[f"dominotree/2{level}"]["draft_size_histogram"]) == 3
        assert len(arms[f"domino/1{level}"]["draft_size_histogram"]) == 2
    assert set(report["cost_model"]) == {"dominotree"}  # the one cost-aware arm: tree.budget=auto
    assert all(arms[a]["lossless"] for a in arms if a.partition("@")[0] != "ar")
    assert set(report["concurrency"]["humaneval"]) == {"ar", "dominotree", "dominotree/2", "domino/1"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["concurrency=0"], "concurrency must be an integer >= 1"),
        (["concurrency=[1,two]"], "concurrency must be an integer >= 1"),
        (["interleave=-1"], "interleave must be an integer >= 0"),
    ],
)
def test_bad_concurrency_is_refused_before_loading(overrides, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        decode.run(_cfg(*overrides), tmp_path)
