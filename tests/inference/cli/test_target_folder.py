"""`target=<folder>` is accepted as `target.spec=<folder>`; any other value that is not a target config is
answered in one line with the right form (`inference.cli.target_folder`)."""

import sys

import pytest
from hydra.core.global_hydra import GlobalHydra

from domino_conf import CONF_DIR
from inference.cli import decode
from inference.cli.target_folder import target_configs, target_folder_overrides


def test_a_folder_becomes_the_spec_and_config_names_and_sweeps_pass(tmp_path):
    assert {"tiny", "smollm2", "qwen3_8b"} <= set(target_configs(CONF_DIR))
    argv = [f"target={tmp_path}", "methods=[ar]", "target=tiny", "target=tiny,smollm2", "target.dtype=float32"]
    assert target_folder_overrides("domino-decode", CONF_DIR, argv) == [f"target.spec={tmp_path}", *argv[1:]]
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "mine.yaml").write_text("spec: tiny-llama\n")
    assert "mine" in target_configs(CONF_DIR, str(tmp_path))
    assert target_folder_overrides("domino-decode", CONF_DIR, ["-cd", str(tmp_path), "target=mine"])[-1] == (
        "target=mine"  # a config of the user's --config-dir, not a folder
    )


@pytest.mark.parametrize("value", ["Qwen/Qwen3-8B", "/no/such/folder"])
def test_a_value_that_is_neither_a_config_nor_a_folder_is_answered_in_one_line(value):
    with pytest.raises(SystemExit) as stop:
        target_folder_overrides("domino-train", CONF_DIR, [f"target={value}"])
    message = str(stop.value.code)
    assert message.startswith(f"domino-train: error: 'target={value}': target= takes a config of conf/target/")
    assert message.endswith(f"pass target.spec={value}") and "\n" not in message


def test_domino_decode_takes_target_equals_a_folder(tmp_path, monkeypatch, restore_logging):
    composed = []
    monkeypatch.setattr(decode, "run", lambda cfg, out_dir: composed.append(cfg))
    monkeypatch.setattr(sys, "argv", ["domino-decode", f"target={tmp_path}", f"hydra.run.dir={tmp_path / 'run'}"])
    GlobalHydra.instance().clear()
    decode.main()
    assert composed[0].target.spec == str(tmp_path)
