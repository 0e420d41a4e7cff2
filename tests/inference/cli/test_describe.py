import json
from pathlib import Path

import pytest

from inference import tiny_target
from inference.cli.describe import main
from inference.drafter.serving import serving_section
from inference.targets.loader import load_target

PRETRAINED = Path(__file__).resolve().parents[3] / "pretrained"


def test_describe_qwen3_8b_offline_on_meta(capsys):
    main(["Qwen/Qwen3-8B"])
    out = capsys.readouterr().out
    assert "target_layer_ids [1, 9, 17, 25, 33]" in out
    assert "head.prefix_gru" in out and "15.73 M" in out and "5.3 % of the backbone" in out


def test_describe_loads_and_drafts_a_tiny_target(capsys):
    main(["tiny-llama", "--num-draft-layers", "2", "--block-size", "4", "--load"])
    out = capsys.readouterr().out
    assert "one draft block" in out and "3 untrained draft tokens" in out


def test_describe_a_drafter_folder_prints_its_serving_section(capsys):
    folder = PRETRAINED / "smollm2-135m-domino"
    main([str(folder)])
    out = capsys.readouterr().out
    assert "2 layers, block 4, head domino, draft vocabulary 8192" in out and "head.prefix_gru" in out
    assert "\n".join(serving_section(json.loads((folder / "config.json").read_text()))) in out


@pytest.mark.parametrize("spec", ["tiny-qwen3", "tiny-llama", pytest.param("smollm2", marks=pytest.mark.slow)])
def test_every_builtin_describes_without_loading_weights(spec, capsys):
    main([spec])
    out = capsys.readouterr().out
    mask = load_target(spec, device="meta").mask_token_id
    assert f"target {spec}: " in out and f"mask id {mask}" in out and "head total" in out


def test_describe_says_when_the_default_layer_ids_repeat_a_layer(tmp_path, capsys):
    shallow = tiny_target("llama", num_layers=4)
    shallow.model.save_pretrained(tmp_path)
    shallow.tokenizer.save_pretrained(tmp_path)
    main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "target_layer_ids [1, 1, 1, 1, 1]" in out
    assert "note: target_layer_ids [1, 1, 1, 1, 1] read the same target layer more than once (layer 1 x5)" in out
