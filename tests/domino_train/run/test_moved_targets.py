"""`_target_` paths recorded before a move keep working: run folders resume and recorded configs instantiate.

The records tested are copies: `fixtures/smollm2_domino_r2_run_identity.json` is the `run_identity.json` of
a run started before domino_train/ was regrouped (issue 23), `fixtures/smollm2_domino_r2_training_config.yaml`
the resolved config of the r2 drafter trained then, and `pretrained/*/training_config.yaml` the ones the
shipped drafters were trained with (read, never written).
"""

import json
from pathlib import Path

import pytest
from hydra.utils import get_object, instantiate
from omegaconf import OmegaConf

from domino_train.data.tokenized_module import TokenizedDataModule
from domino_train.run.moved_targets import MOVED_TARGETS, current_target, upgrade_targets
from domino_train.run.resume import IDENTITY_FILE, ResumeMismatchError, check_identity, run_identity
from domino_train.run.variant import canonical_recipe

REPO = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"
OLD_PATHS = {new: old for old, new in MOVED_TARGETS.items()}


def _targets(node, out):
    if isinstance(node, dict):
        if "_target_" in node:
            out.append(node["_target_"])
        for value in node.values():
            _targets(value, out)
    elif isinstance(node, list):
        for value in node:
            _targets(value, out)
    return out


def test_every_moved_path_resolves_at_its_new_place_only():
    for old, new in MOVED_TARGETS.items():
        assert callable(get_object(new)) and current_target(old) == new
        with pytest.raises(ImportError):
            get_object(old)
    assert current_target("inference.load_target") == "inference.load_target" and current_target(None) is None


@pytest.mark.parametrize(
    "path",
    [
        FIXTURES / "smollm2_domino_r2_training_config.yaml",  # written before the move
        REPO / "pretrained" / "smollm2-135m-domino" / "training_config.yaml",
        REPO / "pretrained" / "smollm2-135m-dflash" / "training_config.yaml",
    ],
)
def test_a_recorded_training_config_instantiates_after_the_upgrade(path):
    cfg = OmegaConf.load(path)
    recorded = _targets(OmegaConf.to_container(cfg), [])
    if path.parent == FIXTURES:
        assert "domino_train.data_module.TokenizedDataModule" in recorded
    upgrade_targets(cfg)
    upgraded = _targets(OmegaConf.to_container(cfg), [])
    assert upgraded == [current_target(t) for t in recorded]
    for target in upgraded:
        assert callable(get_object(target)), target
    assert isinstance(instantiate(cfg.data), TokenizedDataModule)


def test_a_run_recorded_before_the_move_resumes_and_a_changed_recipe_still_does_not(compose_train, tmp_path):
    cfg = compose_train(["experiment=smollm2_domino", "run_id=r2"], tmp_path)
    identity = run_identity(cfg)
    moved = {k: OLD_PATHS[v] for k, v in identity.items() if k.endswith("_target_") and v in OLD_PATHS}
    assert moved == {"data._target_": "domino_train.data_module.TokenizedDataModule"}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / IDENTITY_FILE).write_text(json.dumps({**identity, **moved}))  # as the old code recorded it
    check_identity(run_dir, identity)
    (run_dir / IDENTITY_FILE).write_text(json.dumps({**identity, **moved, "train.lr": 1.0}))
    with pytest.raises(ResumeMismatchError, match="train.lr"):
        check_identity(run_dir, identity)


def test_the_recorded_paths_of_a_live_run_compare_equal_to_the_current_tree(compose_train, tmp_path):
    recorded = json.loads((FIXTURES / "smollm2_domino_r2_run_identity.json").read_text())
    current = run_identity(compose_train(["experiment=smollm2_domino", "run_id=r2"], tmp_path))
    keys = [k for k in recorded if k.endswith("_target_")]
    assert "data._target_" in keys and recorded["data._target_"] != current["data._target_"]
    assert {k: canonical_recipe(recorded)[k] for k in keys} == {k: current[k] for k in keys}
