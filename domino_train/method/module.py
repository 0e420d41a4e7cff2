"""`DominoLitModule`: trains a `DominoDrafter` against a frozen target.

Per step: target features (from the batch's feature cache, or one no-grad target forward), random anchor
blocks drafted in one forward, then `loss = lambda_t * L(base) + (1 - lambda_t) * L(final)` (the loss
itself: `losses.domino_loss`; L is CE on the labels unless `train.loss` mixes in distances to the
target's distribution) with the GRU teacher-forced (`causal_input=teacher_forced`) or rolled out on its
own greedy drafts (`causal_input=ttt`). A drafter without head trains on L(base) alone.

The target is loaded once per process in `setup` (on that rank's device) and kept outside the module's
parameters, optimizer and checkpoints; the drafter borrows its embedding and lm_head by reference. Also
in `setup`: the draft vocabulary (when `draft_vocab_size` is set) is chosen as the N most frequent labels
of the training rows, and `init=target` copies the target's top layers into the drafter; a resumed run
then restores both from its checkpoint. A fit that ends without one optimizer step fails (`on_fit_end`):
its drafter is untrained, so it is neither exported nor reported as a finished run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch

from domino_train.method.losses import BlockLoss, TargetDistribution, block_distribution, domino_loss, top_distribution
from domino_train.method.metrics import run_metrics
from domino_train.method.objectives import (
    acceptance_stats,
    block_targets,
    lambda_at,
    restrict_to_draft_vocab,
    sample_anchors,
    warmup_cosine,
)
from domino_train.method.source_tau import SourceTau
from domino_train.method.target_init import INITS, init_from_target
from inference.drafter import DominoDrafter
from inference.drafter.config import DrafterConfig
from inference.targets.adapter import TargetModel


def clip_gradients(params: Any, clip_val: float, algorithm: str = "norm") -> None:
    """Lightning's two clipping rules: the global L2 norm to `clip_val` ("norm") or each element to
    +-`clip_val` ("value")."""
    if algorithm == "value":
        torch.nn.utils.clip_grad_value_(params, clip_val)
    else:
        torch.nn.utils.clip_grad_norm_(params, clip_val)


CAUSAL_INPUTS = ("teacher_forced", "ttt")


class NoOptimizerStepError(ValueError):
    """A fit ended with `global_step` 0: nothing was trained."""


class DominoLitModule(L.LightningModule):
    def __init__(
        self,
        drafter_config: DrafterConfig,
        target: Callable[..., TargetModel],
        num_anchors: int = 256,
        gamma: float = 7.0,
        causal_input: str = "teacher_forced",
        curriculum: str = "linear",
        lambda_start: float = 1.0,
        decay_ratio: float = 1.0,
        lr: float = 6e-4,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.95),
        warmup_ratio: float = 0.04,
        min_lr_ratio: float = 0.0,
        flex_attention: str = "auto",
        anchor_groups: int = 2,
        seed: int = 0,
        init: str = "random",
        loss: dict[str, float] | None = None,
        run_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if causal_input not in CAUSAL_INPUTS:
            raise ValueError(f"causal_input must be one of {CAUSAL_INPUTS}, got {causal_input!r}")
        if anchor_groups < 1:
            raise ValueError(f"train.anchor_groups must be >= 1, got {anchor_groups}")
        if init not in INITS:
            raise ValueError(f"drafter.init must be one of {INITS}, got {init!r}")
        lambda_at(0, 1, lambda_start, decay_ratio, curriculum)  # validates the curriculum name now
        self.loss = BlockLoss(**(loss or {}))
        self.save_hyperparameters(ignore=["target", "drafter_config"])
        # Logged and checkpointed in its config.json form (the record format); training builds from the config.
        self.save_hyperparameters({"drafter_config": drafter_config.to_hf_dict(), **self.hparams})
        self.config = drafter_config
        self.drafter = DominoDrafter(self.config)
        self.target_factory = target
        self.target: TargetModel | None = None
        self.data_manifest: dict[str, Any] = {}
        self.distill = False  # labels = the target's own next tokens (data.labels=target)
        self.blocks_seen = 0  # anchor blocks trained on so far (all ranks), kept across resumes
        self._val_by_source: SourceTau | None = None  # validation tau per source of the rows

    # --------------------------------------------------------------------------- set-up
    def setup(self, stage: str) -> None:
        first = self.target is None
        if first:
            self.target = self.target_factory(device=self.trainer.strategy.root_device)
            self.drafter.bind_target(self.target.embed_tokens, self.target.lm_head)
        datamodule = getattr(self.trainer, "datamodule", None)
        self.data_manifest = dict(getattr(datamodule, "manifest", {}) or {})
        self.distill = getattr(datamodule, "labels", "text") == "target"
        if first and self.hparams.init == "target":
            init_from_target(self.drafter, self.target)
        if first and self.drafter.vocab.is_subset:
            self.data_manifest["draft_vocab"] = self._choose_draft_vocab(datamodule)
        cached = getattr(datamodule, "feature_layer_ids", None)
        if cached is not None and list(cached) != self.config.target_layer_ids:
            raise ValueError(
                f"the feature cache holds target layers {cached} but the drafter uses "
                f"{self.config.target_layer_ids}: rebuild the cache with these layer ids or train with online features"
            )

    def _choose_draft_vocab(self, datamodule: Any) -> dict[str, Any]:
        """The N most frequent training labels become the draft vocabulary; returns its coverage."""
        v = self.config.vocab_size
        train_set = getattr(datamodule, "train_set", None)
        if train_set is None or not hasattr(train_set, "label_counts"):
            raise ValueError("draft_vocab_size needs a data module whose rows can be counted (TokenizedDataModule)")
        predict = None
        if self.distill and not getattr(train_set, "with_next_ids", False):  # online: run the target per row

            @torch.no_grad()
            def predict(ids: torch.Tensor) -> torch.Tensor:
                return self.target(ids.unsqueeze(0).to(self.target.device)).logits[0].argmax(-1).cpu()

        val_set = getattr(datamodule, "val_set", None)
        val = val_set.label_counts(v, predict) if val_set is not None else None
        report = self.drafter.vocab.choose(train_set.label_counts(v, predict), val)
        print(f"draft vocabulary: {report}")
        return report

    def optimizer(self, fused: bool = False) -> torch.optim.AdamW:
        """AdamW over the drafter's parameters; `fused` runs torch's one-kernel step (2.7x faster than the
        per-tensor loop for the SmolLM2 recipe on 2 CPU cores)."""
        hp = self.hparams
        return torch.optim.AdamW(
            self.drafter.parameters(), lr=hp.lr, betas=tuple(hp.betas), weight_decay=hp.weight_decay, fused=fused
        )

    def _can_fuse_optimizer(self) -> bool:
        """Fused AdamW wherever the gradients reach it unscaled: not under fp16's grad scaler (a fused step
        unscales inside, after the clip would have read scaled gradients) and not under DeepSpeed, whose
        engine owns the optimizer step."""
        trainer = self.trainer
        return (
            self.device.type in ("cpu", "cuda")
            and trainer.precision not in ("16-mixed", "16")
            and "deepspeed" not in type(trainer.strategy).__name__.lower()
        )

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clips a fused optimizer's gradients here: Lightning refuses any fused optimizer under mixed
        precision, because of fp16's scaler, though bf16 has none (and `_can_fuse_optimizer` keeps fp16
        unfused)."""
        if not gradient_clip_val or not any(group.get("fused") for group in optimizer.param_groups):
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
            return
        clip_gradients(self.drafter.parameters(), gradient_clip_val, gradient_clip_algorithm or "norm")

    def configure_optimizers(self) -> dict[str, Any]:
        hp = self.hparams
        opt = self.optimizer(fused=self._can_fuse_optimizer())
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: warmup_cosine(step, total, hp.warmup_ratio, hp.min_lr_ratio)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --------------------------------------------------------------------------- the objective
    def lambda_t(self) -> float:
        hp = self.hparams
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        return lambda_at(self.global_step, total, hp.lambda_start, hp.decay_ratio, hp.curriculum)

    def _use_flex(self) -> bool:
        mode = self.hparams.flex_attention
        return mode == "on" or (mode == "auto" and self.device.type == "cuda")

    def _target_outputs(
        self, batch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None]:
        """The target's features, greedy next ids (when distilling) and top-k distribution (when the loss
        needs it) for the batch: from its feature cache, or from one no-grad target forward."""
        features, next_ids = batch.get("features"), batch.get("next_ids")
        top = (batch["topk_ids"], batch["topk_logprobs"]) if "topk_ids" in batch else None
        if features is not None:  # a cache stores bf16 whatever the drafter trains in
            kind = features.device.type
            autocast_dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None
            if features.dtype != autocast_dtype:  # (under bf16 autocast fc reads bf16: no round trip via fp32)
                features = features.to(self.drafter.backbone.fc.weight.dtype)
        else:
            with torch.no_grad():
                ids = batch["input_ids"]
                out = self.target(ids, attention_mask=batch["attention_mask"], layer_ids=self.config.target_layer_ids)
                features = out.features
                next_ids = out.logits.argmax(-1) if self.distill else None
                top = top_distribution(out.logits, self.loss.topk) if self.loss.needs_distribution else None
        if self.distill and next_ids is None:
            raise ValueError("data.labels=target needs feature caches with next_ids, or online features")
        if self.loss.needs_distribution and top is None:
            raise ValueError(
                f"train.loss ({self.loss}) needs the target's distribution: build the feature caches with "
                "cache.topk=32 (domino-data stages=[cache] cache.topk=32 overwrite=true), or train with online features"
            )
        return features, next_ids, top

    def _step(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, Any]:
        ids, loss_mask = batch["input_ids"], batch["loss_mask"]
        features, next_ids, top = self._target_outputs(batch)
        anchors = sample_anchors(loss_mask, self.hparams.num_anchors, generator)
        targets = block_targets(
            ids,
            loss_mask,
            anchors,
            self.config.num_draft_tokens,
            self.hparams.gamma,
            next_ids if self.distill else None,
        )
        if self.drafter.vocab.is_subset:
            targets = restrict_to_draft_vocab(targets, self.drafter.vocab)
        dist: TargetDistribution | None = None
        if self.loss.needs_distribution:
            dist = block_distribution(*top, anchors, self.config.num_draft_tokens, self.drafter.vocab)
        hidden = self.drafter.forward_blocks(
            features, ids, anchors, use_flex=self._use_flex(), anchor_groups=self.hparams.anchor_groups
        )
        if self.drafter.head is not None and self.hparams.causal_input == "ttt":
            logits = self.drafter.rollout_logits(hidden, targets.causal_tokens[..., 0])
        else:
            logits = self.drafter.block_logits(hidden, targets.causal_tokens if self.drafter.head else None)
        has_head = self.drafter.head is not None
        lam = self.lambda_t() if has_head else 1.0
        final = logits.final if has_head else None
        scored = domino_loss(logits.base, final, targets, lam, self.loss, dist)
        acc_base, tau_base = acceptance_stats(scored.greedy_base, targets)
        acc_final, tau_final = acceptance_stats(scored.greedy_final, targets)
        if "source" in batch and self._val_by_source is not None and not self.training:
            self._val_by_source.add(batch["source"], scored.greedy_base, scored.greedy_final, targets)
        return dict(
            loss=scored.loss,
            ce_base=scored.ce_base,
            ce_final=scored.ce_final,
            lam=lam,
            tau_base=tau_base,
            tau_final=tau_final,
            acc_base=acc_base,
            acc_final=acc_final,
            tokens=int(batch["attention_mask"].sum()),
            blocks=int((anchors >= 0).sum()),
            out_of_vocab=(
                (targets.valid & ~targets.in_vocab).sum() / targets.valid.sum().clamp(min=1)
                if targets.in_vocab is not None
                else None
            ),
        )

    def _generator(self, stage_offset: int, index: int) -> torch.Generator:
        """Anchor draws keyed by (seed, step or batch, rank): identical after a resume."""
        world, rank = self.trainer.world_size, self.trainer.global_rank
        return torch.Generator().manual_seed(self.hparams.seed + stage_offset + (index * world + rank) * 9973)

    def _log(self, prefix: str, r: dict[str, Any], on_step: bool) -> None:
        sync = not on_step
        opts = dict(on_step=on_step, on_epoch=not on_step, sync_dist=sync, batch_size=1)
        self.log(f"{prefix}/loss", r["loss"], prog_bar=True, **opts)
        self.log(f"{prefix}/ce_base", r["ce_base"], **opts)
        self.log(f"{prefix}/ce_final", r["ce_final"], **opts)
        self.log(f"{prefix}/tau_base", r["tau_base"], **opts)
        self.log(f"{prefix}/tau_final", r["tau_final"], prog_bar=prefix == "val", **opts)
        for j, (a, b) in enumerate(zip(r["acc_base"], r["acc_final"], strict=True), start=1):
            self.log(f"{prefix}/acc_base/pos{j:02d}", a, **opts)
            self.log(f"{prefix}/acc_final/pos{j:02d}", b, **opts)
        if r["out_of_vocab"] is not None:  # labels outside the draft vocabulary (weight 0)
            self.log(f"{prefix}/out_of_vocab", r["out_of_vocab"], **opts)
        if prefix == "train":
            self.log("train/lambda", r["lam"], prog_bar=True, **opts)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], **opts)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        r = self._step(batch, self._generator(0, self.trainer.fit_loop.epoch_loop.total_batch_idx))
        self._log("train", r, on_step=True)
        self.log("train/tokens", float(r["tokens"]), on_step=True, reduce_fx="sum", batch_size=1)
        self.blocks_seen += r["blocks"] * self.trainer.world_size
        self.log("train/blocks_seen", float(self.blocks_seen), on_step=True, batch_size=1)
        return r["loss"]

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        norms = [p.grad.detach().norm() for p in self.drafter.parameters() if p.grad is not None]
        if norms:  # (DeepSpeed keeps its gradients to itself and clips them internally)
            self.log("train/grad_norm", torch.stack(norms).norm(), on_step=True, batch_size=1)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        r = self._step(batch, self._generator(1 << 40, batch_idx))
        self._log("val", r, on_step=False)

    def on_validation_epoch_start(self) -> None:
        val_set = getattr(getattr(self.trainer, "datamodule", None), "val_set", None)
        self._val_by_source = SourceTau(list(getattr(val_set, "sources", []) or []), self.device)

    def on_validation_epoch_end(self) -> None:
        """`val/tau_base/<source>`, `val/tau_final/<source>` when the validation rows come from several sources."""
        if self._val_by_source is None or self.trainer.sanity_checking:
            return
        for name, value in self._val_by_source.results(
            lambda t: self.trainer.strategy.reduce(t, reduce_op="sum")
        ).items():
            self.log(f"val/{name}", value, batch_size=1)

    def on_fit_end(self) -> None:
        if self.trainer.global_step == 0 and not self.trainer.received_sigterm:
            raise NoOptimizerStepError(
                "training ended without an optimizer step: the drafter is untrained and was not exported; give the "
                "run steps (trainer.max_steps / trainer.max_epochs) and batches (data, data.batch_size, "
                "trainer.accumulate_grad_batches)"
            )

    # --------------------------------------------------------------------------- checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Checkpoints carry what `domino-export` needs: the drafter's config.json, the data manifest and
        the metrics its model card reports."""
        checkpoint["drafter_config"] = self.config.to_hf_dict()
        checkpoint["data_manifest"] = self.data_manifest
        checkpoint["metrics"] = run_metrics(self.trainer)
        checkpoint["blocks_seen"] = self.blocks_seen

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.blocks_seen = int(checkpoint.get("blocks_seen", 0))
