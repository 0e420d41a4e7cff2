"""`launch/smollm2_ablations_decode.sh`: one domino-decode run per variant's export, the baselines once,
finished runs skipped, then the table of every run (a stub domino-decode writes each results.json)."""

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "launch" / "smollm2_ablations_decode.sh"


def _decode(tmp_path: Path, bin_dir: Path, **env: str) -> list[str]:
    (tmp_path / "calls.log").unlink(missing_ok=True)
    full_env = {**os.environ, "BIN": str(bin_dir), "DOMINO_LOGS": str(tmp_path / "runs"), **env}
    subprocess.run(["bash", str(SCRIPT)], check=True, env=full_env, capture_output=True, text=True)
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_every_variant_decodes_its_export_and_the_baselines_once(tmp_path, decode_bin):
    calls = _decode(tmp_path, decode_bin)
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
    assert _decode(tmp_path, decode_bin) == []  # rerun: every run is finished, only the table is rewritten


def test_variants_and_run_id_choose_the_exports(tmp_path, decode_bin):
    calls = _decode(tmp_path, decode_bin, VARIANTS="ttt", RUN_ID="r3", OUT=str(tmp_path / "out"))
    assert len(calls) == 1 and "smollm2_ttt/r3/export" in calls[0] and f"hydra.run.dir={tmp_path}/out/ttt" in calls[0]
    assert "methods=[ar,dflash,domino,ddtree,dominotree]" in calls[0]
