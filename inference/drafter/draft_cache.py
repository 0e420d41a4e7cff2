"""`DraftKVCache`: the drafter's context keys/values, projected once per committed token.

Each decoding round the drafter sees the features of the tokens committed since the last round; every
draft layer projects them with its own k_proj / v_proj once and they are appended here. The block's own
K/V are used inside the forward and never stored, so nothing needs cropping after a round. Buffers are
preallocated (and grown by doubling) so that their storage stays put between rounds.

Features may also wait in `pending` (`DominoDrafter.append_context(..., defer=True)`), projected together
the next time the drafter reads the cache: a round that decodes plainly (a cost-aware decoder that found
drafting does not pay) then pays no projection, and the next drafting round projects every waiting
position in one call. `length` counts projected positions only.
"""

from __future__ import annotations

import torch


class DraftKVCache:
    def __init__(
        self,
        num_layers: int,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        shape = (batch_size, num_kv_heads, max(capacity, 1), head_dim)
        self.keys = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.values = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.length = 0
        self.pending: list[torch.Tensor] = []  # features [b, n, K*H] appended but not projected yet

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    def _grow(self, needed: int) -> None:
        new_cap = max(needed, 2 * self.capacity)
        for buffers in (self.keys, self.values):
            for i, buf in enumerate(buffers):
                grown = buf.new_empty((*buf.shape[:2], new_cap, buf.shape[3]))
                grown[:, :, : self.length] = buf[:, :, : self.length]
                buffers[i] = grown

    def extend(self, kv_per_layer: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Append the same number n of new positions to every layer ([b, kv_heads, n, d] each)."""
        n = kv_per_layer[0][0].shape[2]
        if self.length + n > self.capacity:
            self._grow(self.length + n)
        end = self.length + n
        for i, (k, v) in enumerate(kv_per_layer):
            self.keys[i][:, :, self.length : end] = k
            self.values[i][:, :, self.length : end] = v
        self.length = end

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The valid prefix of layer i's keys and values."""
        return self.keys[i][:, :, : self.length], self.values[i][:, :, : self.length]

    def crop(self, length: int) -> None:
        if self.pending:
            raise ValueError("the draft cache has features waiting: DominoDrafter.flush_context(cache) first")
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot crop a draft cache of length {self.length} to {length}")
        self.length = length
