"""Run identity: run ids and W&B ids that survive requeues, `ckpt_path=auto`, and the resume guard."""

import json
import os

import pytest
import torch

from domino_train.cli.train import _train as train_task
from domino_train.run.resolvers import default_run_id, gpus_per_node, run_key
from domino_train.run.resume import IDENTITY_FILE, ResumeMismatchError, record_identity, resolve_ckpt_path
from domino_train.run.variant import variant_config, variant_tags


def test_run_id_is_the_slurm_job_inside_a_batch_job_only(monkeypatch):
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(var, raising=False)
    launch_time = default_run_id()
    assert not launch_time.startswith("slurm-") and default_run_id() == launch_time  # one value per process
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NAME", "domino")
    assert default_run_id() == "slurm-4242"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "4200")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert default_run_id() == "slurm-4200_3"
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")  # salloc shells: every command its own run
    assert default_run_id() == launch_time


def test_run_key_is_a_stable_wandb_safe_id_of_the_run_folder(tmp_path):
    logs = tmp_path / "runs"
    assert run_key(str(logs / "multirun" / "abl" / "3_qwen3_8b_ttt"), str(logs)) == "multirun-abl-3_qwen3_8b_ttt"
    assert run_key(str(logs / "tiny" / "slurm-12_0"), str(logs)) == "tiny-slurm-12_0"
    keys = {run_key(str(logs / "multirun" / "abl" / f"{n}_x"), str(logs)) for n in range(3)}
    assert len(keys) == 3
    deep = str(tmp_path / ("very-long-folder-name-" * 6) / "run")  # outside the log dir: absolute, shortened
    key = run_key(deep, str(logs))
    assert len(key) <= 64 and key == run_key(deep, str(logs)) and key.split("-")[-2:-1] == ["run"]
    assert not set(":;,#?/'") & set(key)


def test_gpus_per_node_follows_the_accelerator():
    assert gpus_per_node("gpu", 8) == 8 and gpus_per_node("cuda", "4") == 4
    assert gpus_per_node("cpu", 2) is None


def test_wandb_config_derives_tags_group_and_id(compose_train, tmp_path):
    cfg = compose_train(["experiment=qwen3_8b_dflash", "tags=[paper]"], tmp_path)
    wandb = cfg.logger.wandb
    assert list(wandb.tags) == ["Qwen3-8B", "b16", "no_head", "paper"]
    assert wandb.group == "qwen3_8b" and wandb.job_type == "train" and wandb.resume == "allow"
    assert wandb.id == run_key(cfg.paths.output_dir, cfg.paths.log_dir) and cfg.logger.csv is not None
    assert dict(wandb.summaries)["val/tau_final"] == "max" and dict(wandb.summaries)["val/ce_final"] == "min"
    ttt = compose_train(["experiment=qwen3_8b_ttt"], tmp_path)
    assert variant_tags(ttt) == ["Qwen3-8B", "b16", "domino", "ttt", "curriculum"]
    assert variant_tags(compose_train(["experiment=qwen3_8b_no_curriculum"], tmp_path))[-1] == "no_curriculum"
    assert variant_tags(compose_train(["experiment=qwen3_8b_ttt", "train/loss=ce_tv"], tmp_path))[-1] == "0.1ce+0.9tv"
    assert variant_tags(compose_train(["experiment=qwen3_8b_dflash", "train/loss=kl"], tmp_path))[-1] == "1kl"


def test_variant_config_ignores_seed_paths_and_devices(compose_train, tmp_path):
    a = compose_train(["experiment=tiny", "seed=1", "trainer.devices=2", "data.num_workers=3"], tmp_path)
    b = compose_train(["experiment=tiny", "seed=2", "paths.output_dir=/elsewhere"], tmp_path)
    assert variant_config(a) == variant_config(b)
    assert variant_config(compose_train(["experiment=tiny", "train.causal_input=ttt"], tmp_path)) != variant_config(a)


def test_ckpt_path_auto_resumes_the_same_recipe_only(tiny_cfg, tmp_path):
    cfg = tiny_cfg()
    assert cfg.ckpt_path == "auto" and resolve_ckpt_path(cfg) is None  # nothing to resume: a fresh start
    record_identity(cfg)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    torch.save({}, last)
    assert resolve_ckpt_path(cfg) == str(last)
    assert resolve_ckpt_path(tiny_cfg("trainer.devices=2")) == str(last)  # not part of the recipe
    with pytest.raises(ResumeMismatchError, match=r"another recipe \(seed: 0 -> 1\).*ckpt_path=last"):
        resolve_ckpt_path(tiny_cfg("seed=1"))
    with pytest.raises(ResumeMismatchError, match="train.causal_input"):
        resolve_ckpt_path(tiny_cfg("train.causal_input=ttt"))
    assert resolve_ckpt_path(tiny_cfg("seed=1", "ckpt_path=last")) == "last"  # explicit: no guard
    assert resolve_ckpt_path(tiny_cfg("ckpt_path=null")) is None
    assert json.loads((tmp_path / "run" / IDENTITY_FILE).read_text())["seed"] == 0


def test_a_run_folder_of_another_recipe_ends_domino_train_in_one_line(tiny_cfg, tmp_path, monkeypatch):
    """A sweep resubmitted with its values reordered hands a job another job's folder: one line, no traceback."""
    record_identity(tiny_cfg())
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    torch.save({"global_step": 1, "state_dict": {}}, last)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as stop:
        train_task(tiny_cfg("train.causal_input=ttt"))  # the console script's task, given its config
    message = str(stop.value.code)
    assert message.startswith("domino-train: error: ") and "was started with another recipe" in message
    assert "\n" not in message


def test_ckpt_path_auto_passes_a_cut_short_last_ckpt_over_for_the_newest_readable_one(tiny_cfg, tmp_path, caplog):
    cfg = tiny_cfg()
    record_identity(cfg)
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    for n, step in enumerate((10, 20)):
        torch.save({"step": step}, ckpts / f"step_{step:07d}.ckpt")
        os.utime(ckpts / f"step_{step:07d}.ckpt", (1000 + n, 1000 + n))
    (ckpts / "step_0000030.ckpt").write_bytes(b"PK\x03\x04 cut short")  # the newest, but cut short too
    torch.save({"step": 30, "optimizer_states": [torch.zeros(1000)]}, ckpts / "last.ckpt")
    (ckpts / "last.ckpt").write_bytes((ckpts / "last.ckpt").read_bytes()[:-100])  # killed during its write
    with caplog.at_level("WARNING"):
        assert resolve_ckpt_path(cfg) == str(ckpts / "step_0000020.ckpt")
    assert f"{ckpts / 'last.ckpt'} cannot be read" in caplog.text
    for path in ckpts.glob("step_*"):
        path.unlink()
    with pytest.raises(ValueError, match=r"last.ckpt cannot be read .* ckpt_path=null"):
        resolve_ckpt_path(cfg)
