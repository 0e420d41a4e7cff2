"""`DominoDataModule`: what every data module of training shares: the held-out split, the resumable
sampler (the position inside the epoch is saved with every checkpoint) and the data manifest training
records. `tokenized_module.py` and `synthetic_module.py` fill in where the rows come from."""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from domino_train.data.rows import Rows, collate
from domino_train.data.sampler import ResumableSampler
from inference.targets.adapter import TargetModel

log = logging.getLogger(__name__)


class DominoDataModule(L.LightningDataModule):
    """Shared: the held-out split, the resumable sampler, and the data manifest training records."""

    def __init__(self, batch_size: int, val_size: int, max_length: int, num_workers: int, seed: int) -> None:
        super().__init__()
        self.batch_size, self.val_size, self.max_length = batch_size, val_size, max_length
        self.num_workers, self.seed = num_workers, seed
        self.manifest: dict[str, Any] = {}
        self.train_set: Rows | None = None
        self.val_set: Rows | None = None
        self._sampler: ResumableSampler | None = None
        self._resume: dict[str, int] | None = None

    def check_target(self, target: TargetModel) -> None:
        """Refuse data made for another target than `target` (weights not needed), before any heavy work.

        Rows the module makes with the target itself need no check."""

    def _split(self, rows: Any, n: int, features: Any = None) -> None:
        """Hold `val_size` random rows of one set out for validation; train on the rest. Rows that share an
        `id` (the turns of one conversation, tokenized one row per turn) stay on one side of the split; with
        unique ids the split is the plain random one."""
        if n <= self.val_size:
            raise ValueError(f"the data set has {n} rows; val_size={self.val_size} leaves none to train on")
        ids = rows["id"] if "id" in (getattr(rows, "column_names", None) or ()) else range(n)
        groups: dict[Any, list[int]] = {}
        for j, key in enumerate(ids):
            groups.setdefault(key, []).append(j)
        keys = list(groups)
        held: list[int] = []
        for k in torch.randperm(len(keys), generator=torch.Generator().manual_seed(self.seed)).tolist():
            if len(held) >= self.val_size:
                break
            held += groups[keys[k]]
        kept = set(held)
        train = [j for j in range(n) if j not in kept]
        if not train:
            raise ValueError(
                f"the data set's {n} rows come from {len(keys)} conversations; val_size={self.val_size} leaves "
                "none to train on"
            )
        sets = [(rows, features)]
        self.val_set = Rows(sets, [(0, j) for j in sorted(held)], self.max_length, sources=True)
        self.train_set = Rows(sets, [(0, j) for j in train], self.max_length)

    def _loader(self, dataset: Dataset, sampler: Sampler) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=sampler,
            collate_fn=collate,
            num_workers=self.num_workers,
            drop_last=False,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
        accumulate = self.trainer.accumulate_grad_batches if self.trainer else 1
        self._sampler = ResumableSampler(len(self.train_set), self.batch_size, self.seed, True, rank, world, accumulate)
        if self._sampler.dropped_batches and rank == 0:
            log.info(
                "each epoch leaves its last %d batch(es) out: an optimizer step accumulates %d batches, and every "
                "strategy steps alike only when an epoch holds a whole number of them",
                self._sampler.dropped_batches,
                accumulate,
            )
        if self._resume is not None:
            self._sampler.resume_at(**self._resume)
            self._resume = None
        return self._loader(self.train_set, self._sampler)

    def val_dataloader(self) -> DataLoader:
        rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)
        return self._loader(self.val_set, ResumableSampler(len(self.val_set), self.batch_size, 0, False, rank, world))

    def state_dict(self) -> dict[str, Any]:
        """Where the training data stands: the epoch and the batches it has already delivered."""
        if self.trainer is None:
            return {}
        progress = self.trainer.fit_loop.epoch_loop.batch_progress.current
        return {"epoch": self.trainer.current_epoch, "batches_done": progress.processed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self._resume = {"epoch": int(state["epoch"]), "batches_done": int(state["batches_done"])}
