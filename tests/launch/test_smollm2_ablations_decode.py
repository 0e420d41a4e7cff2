"""`launch/smollm2_ablations_decode.sh`: one domino-decode run per variant's export, the baselines once,
finished runs skipped, then the table of every run (a stub domino-decode writes each results.json)."""

import pytest


@pytest.fixture
def decode(tmp_path, decode_calls):
    return lambda **env: decode_calls("smollm2_ablations_decode.sh", DOMINO_LOGS=str(tmp_path / "runs"), **env)


def test_every_variant_decodes_its_export_and_the_baselines_once(tmp_path, decode):
    calls = decode()
    runs = tmp_path / "runs"
    assert len(calls) == 3 and all("preset=smollm2" in c and "bench=[mt-bench:40,humaneval:40]" in c for c in calls)
    for call, variant in zip(calls, ("domino", "ttt", "no_curriculum"), strict=True):
        assert f"drafter_path={runs}/smollm2_{variant}/r2/export" in call
        assert f"baseline_drafter_path={runs}/smollm2_dflash/r2/export" in call
        assert f"hydra.run.dir={runs}/decode/ablations_r2/{variant}" in call
    assert "methods=[ar,dflash,domino,ddtree,dominotree]" in calls[0]
    assert "methods=[ar,domino,dominotree]" in calls[1] and "methods=[ar,domino,dominotree]" in calls[2]
    summary = (runs / "decode" / "ablations_r2" / "summary.md").read_text().splitlines()
    assert len(summary) == 2 + 3  # the stub's one ar row per run
    assert decode() == []  # rerun: every run is finished, only the table is rewritten


def test_variants_and_run_id_choose_the_exports(tmp_path, decode):
    calls = decode(VARIANTS="ttt", RUN_ID="r3", OUT=str(tmp_path / "out"))
    assert len(calls) == 1 and "smollm2_ttt/r3/export" in calls[0] and f"hydra.run.dir={tmp_path}/out/ttt" in calls[0]
    assert "methods=[ar,dflash,domino,ddtree,dominotree]" in calls[0]
