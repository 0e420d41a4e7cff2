"""The target's KV cache: a transformers `DynamicCache` whose layers grow in place, and the operations
speculative decoding applies to it (length, crop, and the compaction after a tree verification).

`GrowingKVLayer` is a transformers cache layer that appends into preallocated storage.

transformers' `DynamicLayer` concatenates every step (`torch.cat([keys, new])`), which copies the whole
cache once per generated token: on a CPU, at batch 16 and a few hundred tokens, that copy costs about as
much as reading the model's weights. This layer keeps K/V in buffers with spare capacity (doubled when
full) and exposes `keys` / `values` as views of the filled part, so an append writes only the new
entries. Cropping and compaction (`crop_cache` / `compact_cache`) keep working: they slice or write those
views in place, and the next append continues after the current length.

Sliding-window layers get the same layer: transformers' `DynamicSlidingWindowLayer` drops the entries
that leave the window, so it cannot be cropped back past them and compaction would index it by absolute
position. Keeping every entry and masking by position (`sliding_window.py`) gives the window's attention
with the full layers' crop and compaction.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

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


def new_cache(config: object) -> DynamicCache:
    """A KV cache for a model of HF config `config` whose attention layers, full and sliding, are
    `GrowingKVLayer`s that keep every entry (other kinds of layer stay transformers')."""
    cache = DynamicCache(config=config)
    growing = (DynamicLayer, DynamicSlidingWindowLayer)
    cache.layers = [GrowingKVLayer() if type(layer) in growing else layer for layer in cache.layers]
    return cache


def cache_length(cache: DynamicCache) -> int:
    """How many positions the cache holds."""
    return cache.get_seq_length()


def crop_cache(cache: DynamicCache, length: int) -> None:
    """Drop every entry at index >= `length`.

    Uses the negative form of `Cache.crop` (remove n entries), the one both transformers 5.17
    (where a positive value means a final length) and 5.24+ (where it is an error) accept.
    """
    remove = cache.get_seq_length() - length
    if remove < 0:
        raise ValueError(f"cannot crop a cache of length {cache.get_seq_length()} to {length}")
    if remove:
        cache.crop(-remove)


def compact_cache(cache: DynamicCache, start: int, keep: torch.Tensor) -> None:
    """Keep only entries `start + keep` of the window that begins at `start`, moved to `start..`.

    After a tree verification `keep` lists the accepted path's node indices (root first); their K/V
    (rotated for positions start + depth, which equal their new indices) land contiguously.
    """
    keep = keep.to(torch.long)
    for layer in cache.layers:
        if getattr(layer, "keys", None) is None:
            raise NotImplementedError(f"cannot compact cache layer {type(layer).__name__} (no keys tensor)")
        idx = keep.to(layer.keys.device) + start
        n = idx.numel()
        layer.keys[:, :, start : start + n] = layer.keys.index_select(2, idx)
        layer.values[:, :, start : start + n] = layer.values.index_select(2, idx)
    crop_cache(cache, start + keep.numel())
