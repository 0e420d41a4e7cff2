"""Every experiment composes and builds its drafter on the meta device (no GPU, no weights)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException

from domino_train import CONF_DIR
from domino_train.cli import train as cli
from domino_train.run.train import drafter_config
from inference import DominoDrafter, load_target
from inference.precision import resolve_training_precision

EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


def test_the_paper_experiments_are_all_there():
    assert {
        "qwen3_8b_curriculum",
        "qwen3_4b_curriculum",
        "qwen3_8b_dflash",
        "qwen3_8b_ttt",
        "qwen3_8b_no_curriculum",
        "tiny",
        "smollm2_domino",
    } <= set(EXPERIMENTS)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_composes_and_builds_on_meta(experiment, tmp_path, compose_train):
    cfg = compose_train([f"experiment={experiment}"], tmp_path)
    if cfg.target.spec == "smollm2":
        pytest.importorskip("gguf")
    target = load_target(cfg.target.spec, device="meta")
    config = drafter_config(cfg, target)
    with torch.device("meta"):
        drafter = DominoDrafter(config)
    assert (drafter.head is None) == (cfg.drafter.head is None)
    assert config.block_size == cfg.drafter.block_size
    if experiment.startswith("qwen3_8b"):
        assert config.target_layer_ids == [1, 9, 17, 25, 33] and config.mask_token_id == 151669
        assert sum(p.numel() for p in drafter.backbone.parameters()) / 1e6 == pytest.approx(1048.6, abs=0.1)


def test_ablations_are_one_line_overrides(tmp_path, compose_train):
    base = compose_train(["experiment=qwen3_8b_curriculum"], tmp_path)
    assert compose_train(["experiment=qwen3_8b_dflash"], tmp_path).drafter.head is None
    assert compose_train(["experiment=qwen3_8b_ttt"], tmp_path).train.causal_input == "ttt"
    no_cur = compose_train(["experiment=qwen3_8b_no_curriculum"], tmp_path).train
    assert no_cur.curriculum == "none" and no_cur.lambda_start == 0.0
    assert compose_train(["experiment=qwen3_8b_curriculum", "drafter.head=null"], tmp_path).drafter.head is None
    assert base.train.lr == 6e-4 and base.trainer.max_epochs == 6


@pytest.mark.parametrize("flags", [{"avx512_bf16"}, set()], ids=["bf16-cpu", "fp32-cpu"])
def test_the_paper_recipe_trains_in_bf16_on_gpus_and_as_the_precision_policy_says_on_a_cpu(
    tmp_path, compose_train, flags
):
    gpu = compose_train(["experiment=qwen3_8b_curriculum"], tmp_path).trainer
    assert resolve_training_precision(gpu.precision, gpu.accelerator, flags) == "bf16-mixed"
    cpu = compose_train(["experiment=qwen3_8b_curriculum", "trainer=cpu"], tmp_path).trainer
    assert resolve_training_precision(cpu.precision, cpu.accelerator, flags) == ("bf16-mixed" if flags else "32-true")


def test_the_wider_smollm2_data_adds_two_regenerated_slices_and_keeps_the_validation_set(tmp_path, compose_train):
    base = compose_train(["experiment=smollm2_domino"], tmp_path).data
    more = compose_train(["experiment=smollm2_domino", "data=smollm2_recipe_more"], tmp_path).data
    assert more.more_sets[: len(base.more_sets)] == base.more_sets and len(more.more_sets) == len(base.more_sets) + 2
    assert [s.path.split("/")[-2] for s in more.more_sets[-2:]] == ["smollm2-regen2", "smollm2-regen3"]
    assert (more.path, more.val_path, more.labels) == (base.path, base.val_path, base.labels)


@pytest.mark.parametrize("logger", ["none", "csv"])
def test_paper_experiments_leave_no_logger_without_a_class(logger, tmp_path, compose_train):
    cfg = compose_train(["experiment=qwen3_8b_curriculum", f"logger={logger}"], tmp_path)
    assert all("_target_" in c for c in (cfg.get("logger") or {}).values()), cfg.get("logger")
    assert cfg.ablation_set == "qwen3_8b"


def test_unknown_keys_are_rejected(tmp_path, compose_train):
    with pytest.raises(ConfigCompositionException):
        compose_train(["experiment=tiny", "train.lrr=1.0"], tmp_path)


def test_print_config_without_gpu_or_weights():
    out = subprocess.run(
        [sys.executable, "-m", "domino_train", "experiment=qwen3_8b_curriculum", "--cfg", "job"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "spec: Qwen/Qwen3-8B" in out.stdout and "stage: 2" in out.stdout


def test_domino_train_takes_target_equals_a_folder(tmp_path, monkeypatch):
    """`target=<folder>` is `target.spec=<folder>` on the experiment's target config (README: Training)."""
    composed = []
    monkeypatch.setattr(cli, "train", lambda cfg: composed.append(cfg) or {})
    monkeypatch.setattr(
        sys, "argv", ["domino-train", "experiment=tiny", f"target={tmp_path}", f"paths.root_dir={tmp_path}"]
    )
    GlobalHydra.instance().clear()
    cli.main()
    assert composed[0].target.spec == str(tmp_path) and composed[0].target.dtype == "float32"  # tiny's own knobs
