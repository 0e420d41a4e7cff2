"""`GrowingKVLayer`: a transformers cache layer that appends into preallocated storage.

transformers' `DynamicLayer` concatenates every step (`torch.cat([keys, new])`), which copies the whole
cache once per generated token: on a CPU, at batch 16 and a few hundred tokens, that copy costs about as
much as reading the model's weights. This layer keeps K/V in buffers with spare capacity (doubled when
full) and exposes `keys` / `values` as views of the filled part, so an append writes only the new
entries. Cropping and compaction (`TargetModel.crop_cache` / `compact_cache`) keep working: they slice
or write those views in place, and the next append continues after the current length.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

MIN_CAPACITY = 256


class GrowingKVLayer(DynamicLayer):
    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._key_buf: torch.Tensor | None = None
        self._value_buf: torch.Tensor | None = None

    def _views_buffers(self) -> bool:
        return (
            self._key_buf is not None
            and self.keys.numel() > 0
            and self.keys.data_ptr() == self._key_buf.data_ptr()
            and self.keys.shape[0] == self._key_buf.shape[0]
        )

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, add = self.get_seq_length(), key_states.shape[-2]
        if not self._views_buffers() or n + add > self._key_buf.shape[-2]:
            b, h, _, d = key_states.shape
            capacity = max(2 * (n + add), MIN_CAPACITY)
            key_buf = key_states.new_empty(b, h, capacity, d)
            value_buf = value_states.new_empty(b, h, capacity, value_states.shape[-1])
            if n:  # after a batch selection or when full: move what is cached into the new storage
                key_buf[..., :n, :] = self.keys
                value_buf[..., :n, :] = self.values
            self._key_buf, self._value_buf = key_buf, value_buf
        self._key_buf[..., n : n + add, :] = key_states
        self._value_buf[..., n : n + add, :] = value_states
        self.keys = self._key_buf[..., : n + add, :]
        self.values = self._value_buf[..., : n + add, :]
        return self.keys, self.values
