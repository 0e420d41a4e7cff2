"""Compose a training run from `conf/train.yaml` and fit a drafter (entry point: `domino_train/cli/train.py`)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from domino_train.method.module import DominoLitModule
from domino_train.run.input_errors import INPUT_ERRORS, worker_input_error
from domino_train.run.moved_targets import upgrade_targets
from domino_train.run.resume import record_identity, resolve_ckpt_path
from domino_train.run.slurm import cluster_plugins
from domino_train.run.status import write_status
from inference.drafter.config import DrafterConfig
from inference.precision import resolve_training_precision, training_target_dtype
from inference.targets.adapter import TargetModel

log = logging.getLogger(__name__)


def drafter_config(cfg: DictConfig, target: TargetModel) -> DrafterConfig:
    """The drafter for this target: `cfg.drafter` over the target's HF config (weights not needed).

    `drafter.init` is not a shape: it goes to the module (see `domino_train.method.target_init`)."""
    spec = OmegaConf.to_container(cfg.drafter, resolve=True)
    spec.pop("init", None)
    make = instantiate(spec)
    mask = cfg.drafter.mask_token_id if cfg.drafter.mask_token_id is not None else target.mask_token_id
    return make(target.config, mask_token_id=mask)


def build(cfg: DictConfig) -> tuple[DominoLitModule, L.LightningDataModule, L.Trainer]:
    """Everything `train` fits, built from the config (the target's weights are loaded later, in setup).

    A config recorded by an earlier release (a run folder's `.hydra/config.yaml`, an export's
    `training_config.yaml`) may name `_target_` paths that have moved since: they are upgraded first."""
    upgrade_targets(cfg)
    L.seed_everything(cfg.seed, workers=True)
    precision = resolve_training_precision(cfg.trainer.precision, cfg.trainer.accelerator)
    dtype = training_target_dtype(cfg.target.get("dtype"), precision)
    # prepack=False, engine=hf: training backpropagates through the target's plain lm_head and copies its layers.
    target_factory = instantiate(cfg.target, _partial_=True, dtype=dtype, prepack=False, engine="hf")
    described = target_factory(device="meta")  # config, tokenizer and template: no weights
    config = drafter_config(cfg, described)
    datamodule = instantiate(cfg.data)
    datamodule.check_target(described)  # data made for another target ends the run here, before any heavy work
    run_config = OmegaConf.to_container(cfg, resolve=True)
    run_config["trainer"]["precision"] = precision  # the card and training_config.yaml say what ran
    module = DominoLitModule(
        drafter_config=config,
        target=target_factory,
        seed=cfg.seed,
        init=cfg.drafter.get("init", "random"),
        run_config=run_config,
        **OmegaConf.to_container(cfg.train, resolve=True),
    )
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c is not None]
    if not cfg.trainer.get("enable_progress_bar", True):  # Lightning refuses the flag next to a bar callback
        callbacks = [c for c in callbacks if not isinstance(c, ProgressBar)]
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values() if c is not None]
    make_trainer = instantiate(cfg.trainer)
    plugins = [*(make_trainer.keywords.get("plugins") or []), *cluster_plugins()]
    trainer = make_trainer(callbacks=callbacks, logger=loggers or False, plugins=plugins or None, precision=precision)
    return module, datamodule, trainer


# The data modules restore the position inside an epoch themselves (their state_dict), which Lightning's
# check for resumable dataloaders does not see.
warnings.filterwarnings("ignore", message=".*resuming from a checkpoint that ended before the epoch ended.*")


def check_accelerator(cfg: DictConfig) -> None:
    """Refuse a GPU trainer where there is no GPU, before a process group, a logger or the target starts."""
    if str(cfg.trainer.accelerator) in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ValueError(f"no GPU here (trainer.accelerator={cfg.trainer.accelerator}): add trainer=cpu")


def _as_reported(error: BaseException) -> BaseException:
    """A failure of fit as the user should hear of it: Lightning answers Ctrl-C by exiting with status 1 (a
    SystemExit raised while it handles the KeyboardInterrupt), which is the interrupt; a spawned worker's
    input error arrives as the worker's whole traceback, which is that error."""
    if isinstance(error, SystemExit) and isinstance(error.__context__, KeyboardInterrupt):
        return error.__context__
    return worker_input_error(error) or error


def train(cfg: DictConfig) -> dict[str, Any]:
    """Fit (or resume: `ckpt_path`, `auto` by default), export, and return the final metrics."""
    run_dir = cfg.paths.output_dir
    if rank_zero_only.rank == 0:
        log.info("run folder: %s", run_dir)
    write_status(run_dir, "RUNNING")
    trainer = None
    try:
        check_accelerator(cfg)
        ckpt_path = resolve_ckpt_path(cfg)
        if ckpt_path is None:
            record_identity(cfg)  # a fresh start: this folder now holds this recipe
        module, datamodule, trainer = build(cfg)
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
        if trainer._signal_connector.received_sigterm:
            # Lightning ends fit quietly on SIGTERM (Slurm's preemption or requeue): not a finished run, and in a
            # sweep job a normal return would tell the launcher that the requeued job is done
            raise SystemExit(143)
    except BaseException as e:  # a crash, or a requeue signal's SystemExit: the run is marked failed until resumed
        if trainer is not None:
            try:
                finish_wandb(trainer, exit_code=1)
            except Exception as closing:  # W&B's service may already be gone (a requeue kills the job's processes)
                log.warning("could not close the W&B run: %s", closing)
        error = _as_reported(e)
        # An unexpected error's traceback goes to the log (in a sweep job the launcher keeps the exception: the
        # job's log shows it here); bad input is said in one line by the command and in status.json.
        if isinstance(error, Exception) and not isinstance(error, INPUT_ERRORS):
            log.exception("training failed")
        write_status(run_dir, "FAILED" if isinstance(error, Exception) else "STOPPED", error)
        if error is e:
            raise
        raise error from None
    finish_wandb(trainer, exit_code=0)
    write_status(run_dir, "COMPLETED")
    return {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}


def finish_wandb(trainer: L.Trainer, exit_code: int) -> None:
    """Close this job's W&B run (if it was started), even after a crash or a requeue signal: without it the
    next job of a multirun in this process would log into the same run."""
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger._experiment.finish(exit_code=exit_code)
