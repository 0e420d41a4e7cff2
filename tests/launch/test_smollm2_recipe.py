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
    full_env["DOMINO_LOGS"] = str(tmp_path / "logs")
    subprocess.run(["bash", str(SCRIPT)], check=True, env=full_env, capture_output=True, text=True)
    return (tmp_path / "calls.log").read_text().splitlines()


def test_recipe_builds_three_disjoint_slices_then_trains_both_drafters(tmp_path):
    _stub_bin(tmp_path)
    calls = _run(tmp_path)
    data = [c for c in calls if c.startswith("domino-data")]
    assert [c.split()[1] for c in data] == ["name=smollm2-val", "name=smollm2-regen", "name=smollm2-distill"]
    assert "limit=200" in data[0] and "skip=200" in data[1] and "limit=2000" in data[1]
    assert "skip=2200" in data[2] and "tokenize.input=prepared" in data[2] and "regenerate" not in data[2]
    assert sorted(calls[-2:]) == [  # side by side: either may log first
        "domino-train experiment=smollm2_dflash run_id=r1",
        "domino-train experiment=smollm2_domino run_id=r1",
    ]


def test_a_failed_training_fails_the_recipe(tmp_path):
    bin_dir = _stub_bin(tmp_path)
    (bin_dir / "domino-train").write_text('#!/usr/bin/env bash\n[[ "$*" == *dflash* ]] && exit 3\nexit 0\n')
    for name in ("smollm2-val", "smollm2-regen", "smollm2-distill"):
        (tmp_path / "data" / name / "features").mkdir(parents=True)
        (tmp_path / "data" / name / "features" / "index.json").write_text("{}")
    env = {**os.environ, "BIN": str(bin_dir), "DOMINO_DATA": str(tmp_path / "data"), "DOMINO_LOGS": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and (tmp_path / "smollm2_domino" / "r1.log").is_file()


def test_finished_data_stages_are_skipped_and_run_id_is_passed_on(tmp_path):
    _stub_bin(tmp_path)
    for name in ("smollm2-val", "smollm2-distill"):
        (tmp_path / "data" / name / "features").mkdir(parents=True)
        (tmp_path / "data" / name / "features" / "index.json").write_text("{}")
    calls = _run(tmp_path, RUN_ID="r7")
    assert [c.split()[1] for c in calls if c.startswith("domino-data")] == ["name=smollm2-regen"]
    assert all(c.endswith("run_id=r7") for c in calls if c.startswith("domino-train"))


def test_variants_chooses_which_drafters_train(tmp_path):
    _stub_bin(tmp_path)
    calls = _run(tmp_path, VARIANTS="ttt no_curriculum")
    assert sorted(c for c in calls if c.startswith("domino-train")) == [
        "domino-train experiment=smollm2_no_curriculum run_id=r1",
        "domino-train experiment=smollm2_ttt run_id=r1",
    ]


def test_extend_from_continues_a_finished_run_on_a_longer_schedule(tmp_path):
    _stub_bin(tmp_path)
    calls = _run(tmp_path, EXTEND_FROM="r2", RUN_ID="r3", MAX_STEPS="9600", VARIANTS="domino")
    train = [c for c in calls if c.startswith("domino-train")]
    old = tmp_path / "logs" / "smollm2_domino" / "r2" / "checkpoints" / "last.ckpt"
    assert train == [
        f"domino-train experiment=smollm2_domino run_id=r3 trainer.max_steps=9600 train.decay_ratio=0.5 ckpt_path={old}"
    ]  # lambda stays where the 4,800-step schedule left it
    own = tmp_path / "logs" / "smollm2_domino" / "r3" / "checkpoints" / "last.ckpt"
    own.parent.mkdir(parents=True)
    own.write_text("")
    calls = _run(tmp_path, EXTEND_FROM="r2", RUN_ID="r3", MAX_STEPS="9600", VARIANTS="domino")
    assert [c for c in calls if c.startswith("domino-train")] == [  # later: the run resumes itself (auto)
        "domino-train experiment=smollm2_domino run_id=r3 trainer.max_steps=9600 train.decay_ratio=0.5"
    ]


def test_train_data_more_builds_two_more_regenerated_slices_and_trains_on_them(tmp_path):
    _stub_bin(tmp_path)
    for name in ("smollm2-val", "smollm2-regen", "smollm2-distill"):
        (tmp_path / "data" / name / "features").mkdir(parents=True)
        (tmp_path / "data" / name / "features" / "index.json").write_text("{}")
    calls = _run(tmp_path, TRAIN_DATA="smollm2_recipe_more", VARIANTS="domino")
    data = [c for c in calls if c.startswith("domino-data")]
    assert [c.split()[1] for c in data] == ["name=smollm2-regen2", "name=smollm2-regen3"]
    assert "skip=7200" in data[0] and "skip=9200" in data[1]
    assert all("limit=2000" in c and "regenerate" in c for c in data)
    assert [c for c in calls if c.startswith("domino-train")] == [
        "domino-train experiment=smollm2_domino run_id=r1 data=smollm2_recipe_more"
    ]
    assert not any("regen2" in c for c in _run(tmp_path, VARIANTS="domino"))  # only built when trained on


def test_the_mix_recipe_builds_its_slices_and_train_args_reach_every_training(tmp_path):
    _stub_bin(tmp_path)
    env = {"DATA_RECIPE": "mix", "TRAIN_DATA": "smollm2_mix", "VARIANTS": "domino", "TRAIN_ARGS": "train/loss=ce_tv"}
    calls = _run(tmp_path, **env)
    data = [c for c in calls if c.startswith("domino-data")]
    assert [c.split()[1] for c in data] == ["name=smollm2-mix-val", "name=smollm2-mix-train", "name=smollm2-distill"]
    assert all("pipeline/source=smollm2_mix" in c for c in data[:2]) and "temperature" not in data[0]
    assert "regenerate.temperature=0.7" in data[1] and "sharegpt.skip=200" in data[1] and "codeio.skip=50" in data[1]
    assert all("cache.topk=32" in c for c in data)  # distribution losses can train on every cache
    assert [c for c in calls if c.startswith("domino-train")] == [
        "domino-train experiment=smollm2_domino run_id=r1 data=smollm2_mix train/loss=ce_tv"
    ]


def test_data_only_builds_and_trains_nothing(tmp_path):
    _stub_bin(tmp_path)
    calls = _run(tmp_path, DATA_ONLY="1")
    assert len(calls) == 3 and all(c.startswith("domino-data") for c in calls)
