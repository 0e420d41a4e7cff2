"""`launch/smollm2_cost_sweep.sh`: one domino-decode run per budget and window on the validation slice,
finished runs skipped, then the table of every run (a stub domino-decode writes each results.json)."""

import pytest


@pytest.fixture
def sweep(tmp_path, decode_calls):
    return lambda **env: decode_calls("smollm2_cost_sweep.sh", OUT=str(tmp_path / "out"), **env)


def test_every_budget_and_window_decodes_the_validation_prompts_once(tmp_path, sweep):
    calls = sweep(PROMPTS="7")
    dirs = [next(a for a in c.split() if a.startswith("hydra.run.dir=")).rsplit("/", 1)[1] for c in calls]
    assert dirs == [f"budget_{b}" for b in ("4", "8", "16", "32", "auto", "16_repeat")] + ["window_full", "window_auto"]
    assert all("bench=[sharegpt:7]" in c and "preset=smollm2" in c for c in calls)
    assert "tree.budget=auto" in calls[4] and "methods=[ar,ddtree,dominotree]" in calls[4]
    assert (
        "chain.window=null" in calls[6] and "chain.window=auto" in calls[7] and "methods=[ar,dflash,domino]" in calls[7]
    )
    summary = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert len(summary) == 2 + 8 and "| sharegpt | ar | budget_8 |" in summary[3]
    assert sweep() == []  # rerun: every run is finished, only the table is rewritten


def test_the_repeat_run_can_be_left_out(sweep):
    calls = sweep(BUDGETS="auto", WINDOWS="auto", REPEAT="")
    assert len(calls) == 2 and "budget_auto" in calls[0] and "window_auto" in calls[1]


def test_more_overrides_reach_every_run_and_the_chain_runs_can_be_left_out(sweep):
    """`ARGS` (shell-quoted) reaches every run as separate arguments; an empty `WINDOWS` runs no chain."""
    calls = sweep(BUDGETS="2 auto", WINDOWS="", REPEAT="", ARGS="'concurrency=[2,4,8]' interleave=1")
    assert len(calls) == 2 and all(c.endswith("concurrency=[2,4,8] interleave=1") for c in calls)


def test_paired_puts_every_size_in_one_run(tmp_path, sweep):
    calls = sweep(PAIRED="1", BUDGETS="2 auto", WINDOWS="auto", ARGS="'concurrency=[4]'")
    assert len(calls) == 1 and "hydra.run.dir=" + str(tmp_path / "out" / "paired") in calls[0]
    assert "methods=[ar,ddtree/2,dominotree/2,ddtree/auto,dominotree/auto,dflash/auto,domino/auto]" in calls[0]
    assert "tree.budget" not in calls[0] and calls[0].endswith("concurrency=[4]")
