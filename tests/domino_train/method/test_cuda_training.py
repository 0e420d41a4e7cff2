"""Training's CUDA-only branches: flex attention by default, bf16-mixed steps, DeepSpeed's CUDA strategy."""

import pytest
import torch
from lightning.pytorch.strategies import DeepSpeedStrategy

from domino_train.run.strategies import CPUDeepSpeedStrategy, deepspeed_strategy
from domino_train.run.train import build, train

pytestmark = pytest.mark.gpu


def test_deepspeed_strategy_is_lightnings_own_on_cuda():
    strategy = deepspeed_strategy(stage=2)
    assert isinstance(strategy, DeepSpeedStrategy) and not isinstance(strategy, CPUDeepSpeedStrategy)


def test_flex_attention_is_the_default_on_cuda(tiny_cfg):
    module, _, _ = build(tiny_cfg("trainer=gpu", "trainer.devices=1"))
    assert not module._use_flex()  # still on the CPU
    module.to("cuda")
    assert module._use_flex()
    module.hparams.flex_attention = "off"
    assert not module._use_flex()


def test_bf16_mixed_steps_on_one_gpu_train_and_export(tiny_cfg, tmp_path):
    cfg = tiny_cfg(
        "trainer=gpu",
        "trainer.devices=1",
        "trainer.max_steps=4",
        "trainer.max_epochs=null",
        "trainer.val_check_interval=4",
        "callbacks.model_checkpoint.every_n_train_steps=4",
    )
    metrics = train(cfg)
    assert torch.isfinite(torch.tensor(metrics["train/loss"]))
    assert (tmp_path / "run" / "export" / "model.safetensors").is_file()
