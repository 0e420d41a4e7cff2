"""`RaggedKVCache`: the lean engine's KV cache for several sequences decoded together, each at its own length.

Layout `[layers, batch, kv_heads, capacity, head_dim]` like `StaticKVCache`, but every batch row is its own
sequence: `lengths[row]` of its slots are filled (its committed prefix, in position order: slot s holds
position s). A ragged verify forward (`ragged_forward.py`) writes a row's window at slots
`lengths[row] .. lengths[row] + W - 1` and advances every row by W; the decoder then crops or compacts each
row on its own. A finished sequence's row is `reset` and refilled with a new prompt while the others go on.
Slots past a row's length may hold anything (pad entries, a rejected draft, an old sequence): the forward
never shows them to a query, so they need no clearing.

The storage is allocated up front for `batch` rows and `capacity` slots; a forward that would write past
the capacity doubles it first (a copy of the whole storage), so a caller that knows the longest sequence
plus the widest window passes it as `capacity` and never pays that. The storage is made and changed in
inference mode (as the forward that fills it runs), so every method that writes it enters inference mode;
`lengths` is an ordinary tensor, so the decoder may read and set it anywhere.
"""

from __future__ import annotations

import torch

from inference.targets.static_cache import DEFAULT_CAPACITY, grown


class RaggedKVCache:
    """Keys and values of `batch` sequences of their own lengths, for a ragged batched forward."""

    def __init__(
        self,
        num_layers: int,
        batch: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        if batch < 1:
            raise ValueError(f"a ragged cache needs at least one row, got batch={batch}")
        shape = (num_layers, batch, kv_heads, max(capacity, 1), head_dim)
        with torch.inference_mode():
            self.keys = torch.zeros(shape, dtype=dtype, device=device)
            self.values = torch.zeros(shape, dtype=dtype, device=device)
        with torch.inference_mode(False):  # an ordinary tensor even when made inside inference mode
            self.lengths = torch.zeros(batch, dtype=torch.long, device=device)

    @property
    def batch(self) -> int:
        return self.keys.shape[1]

    @property
    def capacity(self) -> int:
        return self.keys.shape[3]

    def length(self, row: int) -> int:
        """How many positions row `row` holds."""
        return int(self.lengths[row])

    @torch.inference_mode()
    def reserve(self, length: int) -> None:
        """Grow the storage (at least doubling) so that slots `0 .. length - 1` exist in every row."""
        if length <= self.capacity:
            return
        capacity, filled = max(length, 2 * self.capacity), int(self.lengths.max())
        self.keys, self.values = (grown(store, capacity, filled) for store in (self.keys, self.values))

    def write(
        self,
        layer: int,
        slots: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        rows: torch.Tensor | None = None,
    ) -> None:
        """Store one layer's new entries [n, kv_heads, W, d] at per-row slots `slots` [n, W] (storage
        reserved), for the first n rows or for the rows `rows` [n] long. By advanced indexing over
        (row, slot): on a CPU a `scatter_` over the slots expanded to every head and dim took 40x longer
        (0.46 ms against 11 us for 8 rows, a sixth of a batched decode step's time)."""
        which = rows if isinstance(rows, torch.Tensor) else torch.arange(slots.shape[0], device=slots.device)
        which = which.unsqueeze(1)
        self.keys[layer].transpose(1, 2)[which, slots] = keys.transpose(1, 2)
        self.values[layer].transpose(1, 2)[which, slots] = values.transpose(1, 2)

    def layer(self, layer: int, span: int, rows: torch.Tensor | int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One layer's first `span` slots of every row or of the first `rows` rows (an int; views), or of
        the rows `rows` [n] long (copies)."""
        keys, values = self.keys[layer, :, :, :span], self.values[layer, :, :, :span]
        if rows is None:
            return keys, values
        if isinstance(rows, int):
            return keys[:rows], values[:rows]
        return keys.index_select(0, rows), values.index_select(0, rows)

    @torch.inference_mode()
    def move(self, source: int, row: int) -> None:
        """Move row `source`'s entries to row `row` (whose entries are dropped) and empty `source`: a
        draining batch keeps its live rows first, so that its forward runs them alone, on views."""
        n = self.length(source)
        for store in (self.keys, self.values):
            store[:, row, :, :n] = store[:, source, :, :n]
        self.lengths[row] = n
        self.lengths[source] = 0

    def crop(self, row: int, length: int) -> None:
        """Drop row `row`'s entries at index >= `length`."""
        if not 0 <= length <= self.length(row):
            raise ValueError(f"cannot crop row {row} of length {self.length(row)} to {length}")
        self.lengths[row] = length

    @torch.inference_mode()
    def compact(self, row: int, start: int, keep: torch.Tensor) -> None:
        """Keep only entries `start + keep` of row `row`'s window that begins at `start`, moved to `start..`
        (a tree verification's accepted path); the row's length becomes `start + len(keep)`."""
        idx = keep.to(device=self.keys.device, dtype=torch.long) + start
        n = idx.numel()
        if n and (int(idx.min()) < start or int(idx.max()) >= self.length(row)):
            raise ValueError(f"keep {keep.tolist()} reaches outside row {row}'s window {start}..{self.length(row)}")
        for store in (self.keys, self.values):
            store[:, row, :, start : start + n] = store[:, row].index_select(2, idx)
        self.crop(row, start + n)

    def reset(self, row: int) -> None:
        """Empty row `row` (a finished sequence's row, to be refilled by a new prompt)."""
        self.lengths[row] = 0


class RowCache:
    """One row of a `RaggedKVCache` seen as a batch-1 target cache, so that a batch-1 decoder's `commit`
    (`TargetModel.crop_cache` / `compact_cache` / `cache_length`) crops or compacts that row unchanged.

    It only forwards the cache operations a commit makes; the forward itself runs over the ragged cache's
    rows (`TargetModel.forward_ragged`), never over a row view. `row` changes when the batch moves the
    sequence to another row (`RaggedKVCache.move`)."""

    def __init__(self, ragged: RaggedKVCache, row: int) -> None:
        if not 0 <= row < ragged.batch:
            raise ValueError(f"row {row} outside a ragged cache of {ragged.batch} rows")
        self.ragged, self.row = ragged, row

    @property
    def length(self) -> int:
        return self.ragged.length(self.row)

    def crop(self, length: int) -> None:
        self.ragged.crop(self.row, length)

    def compact(self, start: int, keep: torch.Tensor) -> None:
        self.ragged.compact(self.row, start, keep)
