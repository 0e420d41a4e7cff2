"""`StaticKVCache`: the lean engine's KV cache, one preallocated tensor per keys and values for all layers.

Layout `[layers, batch, kv_heads, capacity, head_dim]`; `length` positions are filled. An append writes
the new entries in place; crop only moves `length`; compaction after a tree verification gathers the
accepted path's entries of every layer with one `index_select` and one copy. When a forward would pass
`capacity`, the storage doubles (a copy of the filled part), so a caller that knows the longest sequence
passes it as `capacity` and never pays that. The storage is made and changed in inference mode (as the
forward that fills it runs), so every method that writes it enters inference mode itself.
"""

from __future__ import annotations

import torch

DEFAULT_CAPACITY = 1024


def grown(store: torch.Tensor, capacity: int, filled: int) -> torch.Tensor:
    """A copy of cache storage [layers, batch, kv_heads, slots, d] with `capacity` slots, its first `filled`
    slots carried over."""
    new = store.new_zeros(*store.shape[:3], capacity, store.shape[4])
    new[:, :, :, :filled] = store[:, :, :, :filled]
    return new


class StaticKVCache:
    """Storage is allocated by the first forward (which fixes the batch size) for `capacity` positions."""

    def __init__(
        self,
        num_layers: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self._shape = (num_layers, kv_heads, head_dim)
        self._dtype, self._device, self._capacity = dtype, torch.device(device), max(capacity, 1)
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.length = 0

    @property
    def capacity(self) -> int:
        return self._capacity if self.keys is None else self.keys.shape[3]

    def get_seq_length(self) -> int:
        return self.length

    @torch.inference_mode()
    def reserve(self, batch_size: int, length: int) -> None:
        """Allocate (first call) or grow the storage (doubling) so that `length` positions fit."""
        if self.keys is None:
            layers, heads, dim = self._shape
            shape = (layers, batch_size, heads, max(self._capacity, length), dim)
            self.keys = torch.zeros(shape, dtype=self._dtype, device=self._device)
            self.values = torch.zeros(shape, dtype=self._dtype, device=self._device)
            return
        if self.keys.shape[1] != batch_size:
            raise ValueError(f"a cache of batch size {self.keys.shape[1]} cannot take a batch of {batch_size}")
        if length <= self.capacity:
            return
        capacity = max(length, 2 * self.capacity)
        self.keys, self.values = (grown(store, capacity, self.length) for store in (self.keys, self.values))

    def write(self, layer: int, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Store one layer's new entries [b, kv_heads, q, d] at positions `start..` (storage reserved)."""
        q = keys.shape[2]
        self.keys[layer, :, :, start : start + q] = keys
        self.values[layer, :, :, start : start + q] = values

    def layer(self, layer: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of one layer's first `length` keys and values."""
        return self.keys[layer, :, :, :length], self.values[layer, :, :, :length]

    def crop(self, length: int) -> None:
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot crop a cache of length {self.length} to {length}")
        self.length = length

    @torch.inference_mode()
    def compact(self, start: int, keep: torch.Tensor) -> None:
        """Keep only entries `start + keep` of the window that begins at `start`, moved to `start..`."""
        if self.keys is None:
            raise ValueError("cannot compact an empty cache")
        idx = keep.to(device=self.keys.device, dtype=torch.long) + start
        n = idx.numel()
        for store in (self.keys, self.values):
            store[:, :, :, start : start + n] = store.index_select(3, idx)
        self.crop(start + n)

    @torch.inference_mode()
    def batch_select_indices(self, rows: torch.Tensor) -> None:
        """Keep only the batch rows `rows` (a batched generation dropping finished sequences; the name
        transformers' caches use)."""
        self.keys = self.keys.index_select(1, rows.to(self.keys.device))
        self.values = self.values.index_select(1, rows.to(self.values.device))
