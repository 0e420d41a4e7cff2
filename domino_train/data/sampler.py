"""`ResumableSampler`: the training data order, a pure function of (seed, epoch, rank) that can start
mid-epoch, so `ckpt_path=last` resumes on exactly the batch an uninterrupted run would see next."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class ResumableSampler(Sampler[int]):
    """Shuffled per epoch from (seed, epoch), split across ranks, able to start mid-epoch."""

    def __init__(self, num_rows: int, batch_size: int, seed: int, shuffle: bool, rank: int = 0, world: int = 1):
        self.num_rows, self.batch_size, self.seed, self.shuffle = num_rows, batch_size, seed, shuffle
        self.rank, self.world = rank, world
        self.epoch, self.skip_batches, self._skip_epoch = 0, 0, -1
        self.per_rank = num_rows // world
        if self.per_rank == 0:
            raise ValueError(f"{num_rows} rows cannot be split across {world} ranks")

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume_at(self, epoch: int, batches_done: int) -> None:
        self._skip_epoch, self.skip_batches = epoch, batches_done

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            order = torch.randperm(self.num_rows, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        else:
            order = torch.arange(self.num_rows)
        mine = order[self.rank : self.per_rank * self.world : self.world].tolist()
        if self.epoch == self._skip_epoch:
            mine = mine[self.skip_batches * self.batch_size :]
            self._skip_epoch = -1
        return iter(mine)

    def __len__(self) -> int:
        return self.per_rank
