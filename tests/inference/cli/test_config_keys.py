"""Keys that no part of a command reads are refused in one line, before the command runs."""

import sys

import pytest
from hydra.core.global_hydra import GlobalHydra

from domino_conf import CONF_DIR
from domino_train.cli import data, train
from inference.cli import decode
from inference.cli.config_keys import unknown_keys

COMMANDS = {"domino-train": train.main, "domino-data": data.main, "domino-decode": decode.main}


@pytest.mark.parametrize(
    ("prog", "argv", "named"),
    [
        ("domino-train", ["experiment=tiny", "foo=1"], "'foo'"),
        ("domino-train", ["experiment=tiny", "+train.lrr=1"], "'train.lrr' (did you mean 'train.lr'?"),
        ("domino-train", ["-m", "experiment=tiny", "seed=0,1", "++trainer.max_step=3"], "'trainer.max_steps'?"),
        ("domino-data", ["+prepare.max_char=5"], "'prepare.max_char' (did you mean 'prepare.max_chars'?"),
        ("domino-data", ["pipeline/source=local_files", "+pipeline.source.sources.local.skp=5"], "'...local.skip'?"),
        ("domino-decode", ["+max_new_token=5"], "'max_new_token' (did you mean 'max_new_tokens'?"),
        ("domino-decode", ["tree.budgett=5"], "'tree.budgett' (did you mean 'tree.budget'?"),
    ],
)
def test_an_unknown_key_ends_the_command_in_one_line_naming_the_closest_key(prog, argv, named, monkeypatch):
    GlobalHydra.instance().clear()
    monkeypatch.setattr(sys, "argv", [prog, *argv])
    with pytest.raises(SystemExit) as stop:
        COMMANDS[prog]()
    message = str(stop.value.code)
    assert message.startswith(f"{prog}: error: unknown config key ") and "\n" not in message
    assert named.replace("...", "pipeline.source.sources.") in message


@pytest.mark.parametrize(
    ("config", "overrides"),
    [
        ("train", ["experiment=tiny", "+trainer.accumulate_grad_batches=2", "train.lr=1e-3"]),  # a Trainer keyword
        ("train", ["+callbacks.timer={_target_: lightning.pytorch.callbacks.Timer, duration: '00:01:00:00'}"]),
        ("train", ["experiment=tiny,smollm2_domino", "seed=0,1", "hydra/launcher=submitit_local", "hydra.foo=1"]),
        ("data_pipeline", ["pipeline/source=local_files", "+pipeline.source.sources.local.skip=5"]),
        ("decode", ["preset=smollm2", "bench_data.gsm8k=/x", "~baseline_drafter_path"]),
    ],
)
def test_keys_the_program_reads_are_accepted(config, overrides):
    assert unknown_keys(CONF_DIR, config, overrides) is None


def test_an_added_node_is_checked_against_what_it_instantiates():
    found = unknown_keys(CONF_DIR, "train", ["+callbacks.timer={_target_: lightning.pytorch.callbacks.Timer, x: 1}"])
    assert found.startswith("'callbacks.timer.x'")
    found = unknown_keys(CONF_DIR, "train", ["+trainer.foo=3", "+train.lrr=1"])
    assert found.startswith("'train.lrr' (did you mean 'train.lr'?") and "; 'trainer.foo' (did you mean" in found


def test_a_command_line_hydra_cannot_compose_is_left_to_hydra():
    assert unknown_keys(CONF_DIR, "train", ["experiment=no_such_experiment", "foo=1"]) is None
