"""`deepspeed_strategy` follows the trainer's accelerator: a cpu trainer gets the CPU strategy even on a GPU node."""

import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch.strategies import DeepSpeedStrategy

from domino_train.run.strategies import CPUDeepSpeedStrategy, deepspeed_strategy


@pytest.mark.parametrize("accelerator", ["cpu", "gpu", None], ids=["cpu", "gpu_accelerator", "none"])
def test_the_cpu_strategy_wherever_cuda_is_missing(monkeypatch, accelerator):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert isinstance(deepspeed_strategy(accelerator=accelerator, stage=2), CPUDeepSpeedStrategy)


def test_a_cpu_trainer_gets_the_cpu_strategy_on_a_gpu_node(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert isinstance(deepspeed_strategy(accelerator="cpu", stage=2), CPUDeepSpeedStrategy)
    gpu = deepspeed_strategy(accelerator="gpu", stage=2)
    assert isinstance(gpu, DeepSpeedStrategy) and not isinstance(gpu, CPUDeepSpeedStrategy)


@pytest.mark.parametrize("trainer", ["cpu", "gpu"], ids=["cpu_trainer", "gpu_trainer"])  # an id "gpu" = the marker
def test_the_strategy_configs_pass_the_trainers_accelerator(compose_train, trainer, monkeypatch):
    cfg = compose_train(["experiment=tiny", f"trainer={trainer}", "strategy=deepspeed_stage_3"])
    assert cfg.trainer.strategy.accelerator == cfg.trainer.accelerator == trainer
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    strategy = instantiate(cfg.trainer.strategy)
    assert isinstance(strategy, CPUDeepSpeedStrategy) == (trainer == "cpu")
