"""Training callbacks: the drafter export at the end of fit, tokens/s on the progress bar, and the
validation a resumed run owes."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loops.evaluation_loop import RestartStage

from domino_train.export.folder import write_export
from domino_train.method.metrics import run_metrics


class RedoDueValidation(Callback):
    """A run resumed from a step checkpoint redoes the validation due at that step.

    A step checkpoint is written at the end of the training batch, before that step's validation runs, so a
    run killed after it (during the validation, or before the next checkpoint) resumes past a validation
    that no checkpoint saw. Lightning fast-forwards over it; this marks it unfinished instead (the state
    Lightning gives a run killed mid-validation), so the resumed run validates that step first and the
    curve has no hole. The checkpoint's validation progress is the previous, finished validation's; it is
    cleared, or the redone validation would resume after that one's last batch and cover one batch only.
    """

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loop = trainer.fit_loop.epoch_loop
        fetcher = trainer.fit_loop._data_fetcher
        if loop.restarted_on_train_batch_end and fetcher is not None and loop._should_check_val_fx(fetcher):
            loop.val_loop._restart_stage = RestartStage.RESTARTED_MID_EVALUATION
            loop.val_loop.batch_progress.reset_on_run()  # from the first batch
            loop._batches_that_stepped -= 1  # the logging step: the end of that batch now counts it once more


class ExportDrafter(Callback):
    """Write the trained drafter to `dirpath` in the public Domino / DFlash format when fit ends.

    Beside `config.json` and `model.safetensors` it records `data_manifest.json` (which data trained it)
    and `training_config.yaml` (the resolved run configuration).
    """

    def __init__(self, dirpath: str, dtype: str = "bfloat16") -> None:
        self.dirpath, self.dtype = Path(dirpath), getattr(torch, dtype)
        self.exported: Path | None = None
        self._train_ended = False

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._train_ended = True
        self._export(trainer, pl_module)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A run requeued after its last checkpoint but before the export resumes at max_steps: Lightning then
        # skips the training loop and with it on_train_end, so the export happens here.
        if not self._train_ended and trainer.max_steps > 0 and trainer.global_step >= trainer.max_steps:
            self._export(trainer, pl_module)

    def _export(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer._signal_connector.received_sigterm:  # stopped early (preemption, requeue): no partial export
            return
        if trainer.global_step == 0:  # nothing trained: the module fails the run (DominoLitModule.on_fit_end)
            return
        with gathered_parameters(trainer, pl_module.drafter):
            if trainer.is_global_zero:
                self.exported = write_export(
                    pl_module.drafter,
                    self.dirpath,
                    self.dtype,
                    pl_module.data_manifest,
                    pl_module.hparams.get("run_config"),
                    run_metrics(trainer),
                )
                print(f"exported drafter -> {self.exported}")
        trainer.strategy.barrier()


def gathered_parameters(trainer: L.Trainer, module: torch.nn.Module) -> contextlib.AbstractContextManager:
    """Under DeepSpeed ZeRO-3 the parameters are sharded: gather them (every rank must enter)."""
    engine = getattr(trainer.strategy, "deepspeed_engine", None)
    if engine is not None and engine.zero_optimization_stage() == 3:
        import deepspeed

        return deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None)
    return contextlib.nullcontext()


class TokensPerSecond(Callback):
    """Training tokens per second (all ranks), shown on the progress bar and logged, and the training
    seconds so far (`train/seconds`, kept across resumes): the x-axis of curves against compute."""

    def __init__(self) -> None:
        self._t0: float | None = None
        self.seconds = 0.0

    def state_dict(self) -> dict[str, float]:
        return {"seconds": self.seconds}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.seconds = float(state.get("seconds", 0.0))

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, idx: int) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, idx: int
    ) -> None:
        if self._t0 is None:
            return
        seconds = time.perf_counter() - self._t0
        tokens = int(batch["attention_mask"].sum()) * trainer.world_size
        pl_module.log("train/tokens_per_s", tokens / max(seconds, 1e-9), on_step=True, prog_bar=True, batch_size=1)
        pl_module.log("train/s_per_step", seconds, on_step=True, batch_size=1)
        self.seconds += seconds
        pl_module.log("train/seconds", self.seconds, on_step=True, batch_size=1)
