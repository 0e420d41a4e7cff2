"""`launch/smollm2_recipe.sh` runs the data stages it still needs, then both trainings (stub commands)."""

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "launch" / "smollm2_recipe.sh"


def _stub_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("domino-data", "domino-train"):
        stub = bin_dir / name
        stub.write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> "{tmp_path}/calls.log"\n')
        stub.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, **env: str) -> list[str]:
    (tmp_path / "calls.log").unlink(missing_ok=True)
    full_env = {**os.environ, "BIN": str(tmp_path / "bin"), "DOMINO_DATA": str(tmp_path / "data"), **env}
    subprocess.run(["bash", str(SCRIPT)], check=True, env=full_env, capture_output=True, text=True)
    return (tmp_path / "calls.log").read_text().splitlines()


def test_recipe_builds_three_disjoint_slices_then_trains_both_drafters(tmp_path):
    _stub_bin(tmp_path)
    calls = _run(tmp_path)
    data = [c for c in calls if c.startswith("domino-data")]
    assert [c.split()[1] for c in data] == ["name=smollm2-val", "name=smollm2-regen", "name=smollm2-distill"]
    assert "limit=200" in data[0] and "skip=200" in data[1] and "limit=1000" in data[1]
    assert "skip=1200" in data[2] and "tokenize.input=prepared" in data[2] and "regenerate" not in data[2]
    assert calls[-2:] == [
        "domino-train experiment=smollm2_domino run_id=r1",
        "domino-train experiment=smollm2_dflash run_id=r1",
    ]


def test_finished_data_stages_are_skipped_and_run_id_is_passed_on(tmp_path):
    _stub_bin(tmp_path)
    for name in ("smollm2-val", "smollm2-distill"):
        (tmp_path / "data" / name / "features").mkdir(parents=True)
        (tmp_path / "data" / name / "features" / "index.json").write_text("{}")
    calls = _run(tmp_path, RUN_ID="r7")
    assert [c.split()[1] for c in calls if c.startswith("domino-data")] == ["name=smollm2-regen"]
    assert all(c.endswith("run_id=r7") for c in calls if c.startswith("domino-train"))
