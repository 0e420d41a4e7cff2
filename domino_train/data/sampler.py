"""`ResumableSampler`: the training data order, a pure function of (seed, epoch, rank) that can start
mid-epoch, so `ckpt_path=last` resumes on exactly the batch an uninterrupted run would see next.

An epoch holds a whole number of gradient accumulations: the batches left over are dropped. Lightning
steps on an epoch's last batch whatever it accumulated, while under DeepSpeed the engine's accumulation
runs on across epochs and Lightning counts only the steps completed inside one (with fewer batches than
one accumulation, none: `global_step` stays 0). With no left-over batch every strategy takes the same steps.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class ResumableSampler(Sampler[int]):
    """Shuffled per epoch from (seed, epoch), split across ranks, able to start mid-epoch; each epoch holds
    a whole number of `accumulate` batches (the optimizer steps per epoch: `steps_per_epoch`)."""

    def __init__(
        self,
        num_rows: int,
        batch_size: int,
        seed: int,
        shuffle: bool,
        rank: int = 0,
        world: int = 1,
        accumulate: int = 1,
    ) -> None:
        self.num_rows, self.batch_size, self.seed, self.shuffle = num_rows, batch_size, seed, shuffle
        self.rank, self.world = rank, world
        self.epoch, self.skip_batches, self._skip_epoch = 0, 0, -1
        self.per_rank = num_rows // world
        if self.per_rank == 0:
            raise ValueError(f"{num_rows} rows cannot be split across {world} ranks")
        batches = -(-self.per_rank // batch_size)
        self.steps_per_epoch, self.dropped_batches = divmod(batches, accumulate)
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"trainer.accumulate_grad_batches={accumulate} is more than the {batches} batches an epoch holds "
                f"({self.per_rank} training rows per device, data.batch_size={batch_size}): no optimizer step would "
                "be taken; lower trainer.accumulate_grad_batches or add data"
            )
        self.per_epoch = min(self.per_rank, self.steps_per_epoch * accumulate * batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def resume_at(self, epoch: int, batches_done: int) -> None:
        self._skip_epoch, self.skip_batches = epoch, batches_done

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            order = torch.randperm(self.num_rows, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        else:
            order = torch.arange(self.num_rows)
        mine = order[self.rank : self.per_rank * self.world : self.world].tolist()[: self.per_epoch]
        if self.epoch == self._skip_epoch:
            mine = mine[self.skip_batches * self.batch_size :]
            self._skip_epoch = -1
        return iter(mine)

    def __len__(self) -> int:
        return self.per_epoch
