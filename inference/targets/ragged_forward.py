"""One lean forward over a ragged batch: several sequences, each at its own cache length, each verifying
(or prefilling) its own window, in ONE pass of the layer loop (`LeanForward.layers_forward`).

Row r's cache (`RaggedKVCache`) holds `lengths[r]` committed positions. Its window (`RaggedWindow`,
padded to the batch's width W) runs at positions `lengths[r] + depths[r]`, and every layer writes the
window's K/V at slots `lengths[r] .. lengths[r] + W - 1` by index (pad columns included: they sit past
the row's committed entries, no query but their own sees them, and the decoder's crop / compaction drops
them). The queries attend over the first `span = max(lengths) + W` slots of every row (the same as
attending over the whole capacity with the rest masked, only cheaper) under an additive mask
[B, 1, W, span] (`ragged_mask`): a real query sees its row's committed slots `< lengths[r]` and the real
window slots `visible` allows, within the sliding window where the model has one; a pad query sees only
its own slot, so its softmax stays finite. Every row then advances by W; the decoder crops or compacts
each row to what it accepted (`RaggedKVCache.crop` / `compact`). A forward may also run a subset of
the cache's rows (`rows`): a refill's prefill computes only the refilled rows, and a draining batch,
whose live rows the decoder keeps first, only those (read as views of the storage, not copies).

Where rows verify windows of different widths, the pad columns are not computed: the window's real
tokens run packed through every per-token op (norms, linears, rotary, MLP, the lm_head) and are laid
out padded only for attention (`Packing`). Pad queries are zeros there; their K/V slots hold zeros. On
a CPU the padded attention is not free (it grows with the cached context): a cost-aware batch prices
the pad slots of the widest row (`inference.decoding.batch_budget`).

The span is part of the forward's shape: the attention kernel blocks over the keys, so a row attending
next to a longer row can round differently from the same row alone (masked slots add nothing, but the
blocking moves), and so is the number of packed tokens (a linear's kernel may block over its rows).
The lossless check replays a batched row with the batch's span and packed tokens (`LogitsProbe`).

This is the idea of `graphed_forward.py` (K/V written by slot index, attention over the storage under a
mask) with a start per row instead of one. Nothing is captured: it runs eagerly on any device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inference.targets.lean_forward import LeanForward, Packing
from inference.targets.ragged_cache import RaggedKVCache
from inference.targets.ragged_window import RaggedWindow
from inference.targets.static_cache import DEFAULT_CAPACITY


def lean_of(engine: object) -> LeanForward:
    """The eager `LeanForward` of a target's engine (`target.lean`: the lean loop, or the graphed engine
    around it, whose eager loop a ragged forward runs)."""
    lean = getattr(engine, "lean", engine)
    if not isinstance(lean, LeanForward):
        raise ValueError(f"a ragged forward runs on the lean engine, not on {type(engine).__name__}")
    return lean


def new_ragged_cache(lean: LeanForward, batch: int, capacity: int | None = None) -> RaggedKVCache:
    """An empty ragged cache of `batch` rows for this loop's model; `capacity` = the longest sequence plus
    the widest window it will hold, when known (the storage then never grows)."""
    weight = lean.lm_head.weight
    return RaggedKVCache(
        len(lean.layers),
        batch,
        lean.kv_heads,
        lean.head_dim,
        weight.dtype,
        weight.device,
        capacity or DEFAULT_CAPACITY,
    )


def ragged_mask(
    starts: torch.Tensor, window: RaggedWindow, span: int, sliding: int | None, dtype: torch.dtype
) -> torch.Tensor:
    """The additive mask [B, 1, W, span] of `window` after each row's `starts` [B] cached positions (see
    the module doc); `sliding`: the model's sliding window, or None."""
    b, w = window.ids.shape
    device = window.ids.device
    slot = torch.arange(span, device=device)
    rel = slot.unsqueeze(0) - starts.unsqueeze(1)  # [B, span]: index in the row's window (< 0: committed)
    col = rel.clamp(0, w - 1)
    valid = window.valid
    own = torch.eye(w, dtype=torch.bool, device=device)
    seen = (window.visible & valid.unsqueeze(2) & valid.unsqueeze(1)) | own  # [B, W, W]; pads: themselves
    allowed = seen.gather(2, col.unsqueeze(1).expand(b, w, span))
    allowed &= ((rel >= 0) & (rel < w)).unsqueeze(1)
    allowed |= (rel < 0).unsqueeze(1) & valid.unsqueeze(2)
    if sliding is not None:
        keys = torch.where(rel < 0, slot.unsqueeze(0), starts.unsqueeze(1) + window.depths.gather(1, col))
        queries = starts.unsqueeze(1) + window.depths  # [B, W]
        allowed &= keys.unsqueeze(1) > queries.unsqueeze(2) - sliding
    mask = torch.zeros(b, 1, w, span, dtype=dtype, device=device)
    return mask.masked_fill_(~allowed.unsqueeze(1), torch.finfo(dtype).min)


def packing(window: RaggedWindow) -> Packing | None:
    """The window's real tokens as a `Packing`, or None where no column is padding (nothing to gain)."""
    b, w = window.ids.shape
    flat = window.valid.reshape(-1)
    index = flat.nonzero().squeeze(1)
    return None if index.numel() == b * w else Packing(index, b, w)


def _layers(
    lean: LeanForward,
    cache: RaggedKVCache,
    window: RaggedWindow,
    layer_ids: list[int] | None,
    rows: torch.Tensor | int | None,
) -> tuple[torch.Tensor, torch.Tensor | None, Packing | None]:
    """The layer loop over `window` (see `ragged_hidden`): the last hidden state and the features, packed
    [N, ...] over the real tokens when the window has padding (the `Packing` returned), else [n, W, ...]."""
    b, w = window.ids.shape
    n = cache.batch if rows is None else rows if isinstance(rows, int) else rows.numel()
    if b != n:
        raise ValueError(f"a ragged window of {b} rows on {n} cache rows")
    if rows is None or isinstance(rows, int):
        rows = None if n == cache.batch else n
        lengths = cache.lengths[:n]  # a view: advanced in place below
    else:
        lengths = cache.lengths.index_select(0, rows)
    starts = lengths.to(window.ids.device, copy=True)
    span = int(starts.max()) + w
    cache.reserve(span)
    positions = starts.unsqueeze(1) + window.depths
    slots = starts.unsqueeze(1) + torch.arange(w, device=starts.device)  # [B, W]
    written = rows if isinstance(rows, torch.Tensor) else torch.arange(b, device=slots.device)  # once per forward
    mask = ragged_mask(starts, window, span, lean.window, cache.keys.dtype)

    def attend_to(i: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cache.write(i, slots, keys, values, written)
        return cache.layer(i, span, rows)

    pack = packing(window)
    if pack is None:
        x = lean.embed_tokens(window.ids)
    else:
        x = lean.embed_tokens(window.ids.reshape(-1).index_select(0, pack.index))
        positions = positions.reshape(-1).index_select(0, pack.index)
    x, features = lean.layers_forward(x, positions, mask, attend_to, layer_ids, pack)
    if isinstance(rows, torch.Tensor):
        cache.lengths.index_add_(0, rows, torch.full_like(rows, w))
    else:
        lengths.add_(w)
    return x, features, pack


def _unpack(x: torch.Tensor, pack: Packing | None) -> torch.Tensor:
    """[N, ...] packed rows back in their padded window [B, W, ...] (pad columns 0)."""
    if pack is None:
        return x
    full = x.new_zeros(pack.batch * pack.width, *x.shape[1:]).index_copy_(0, pack.index, x)
    return full.view(pack.batch, pack.width, *x.shape[1:])


@torch.inference_mode()
def ragged_hidden(
    lean: LeanForward,
    cache: RaggedKVCache,
    window: RaggedWindow,
    layer_ids: list[int] | None = None,
    rows: torch.Tensor | int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The last hidden state [n, W, H] and the features of `layer_ids` [n, W, K*H] (or None) of `window`,
    writing its K/V into `cache` and advancing its rows by W: every row of the cache (n = its batch), the
    first `rows` rows (an int: read as views), or the rows `rows` [n] long (read as copies); the others
    are neither computed nor changed. Pad columns come back 0."""
    x, features, pack = _layers(lean, cache, window, layer_ids, rows)
    return _unpack(x, pack), None if features is None else _unpack(features, pack)


@torch.inference_mode()
def ragged_forward(
    lean: LeanForward,
    cache: RaggedKVCache,
    window: RaggedWindow,
    layer_ids: list[int] | None = None,
    rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logits [B, W, V] and features [B, W, K*H] (or None) of a ragged verify round over every row of the
    cache, or over its first `rows` rows (B = `rows`; the others untouched); every computed row's length
    grows by W (pad columns included): crop or compact each row afterwards. Pad columns' logits and
    features are 0: the lm_head, the largest linear, runs on the real tokens only."""
    x, features, pack = _layers(lean, cache, window, layer_ids, rows)
    logits = lean.lm_head(lean.norm(x))
    return _unpack(logits, pack), None if features is None else _unpack(features, pack)


@torch.inference_mode()
def ragged_prefill(
    lean: LeanForward,
    cache: RaggedKVCache,
    prompts: Sequence[torch.Tensor | list[int] | None],
    layer_ids: list[int] | None = None,
    pad_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Append each row's prompt (None: a row left as it is) to its cached entries in one forward over the
    rows that have one (W = their longest prompt; a row without a prompt is not computed, so refilling one
    row of a busy batch costs one row's prefill, and the forward's shape does not depend on the other
    rows), then crop those rows to their real tokens. Returns the logits at each row's last prompt token
    [B, V], the features [B, W, K*H] (or None; row r's first len(prompt r) are real) and the window's
    `valid` [B, W]; a row without a prompt has zeros."""
    if len(prompts) != cache.batch:
        raise ValueError(f"{len(prompts)} prompts (None for a row left as it is) for a cache of {cache.batch} rows")
    chosen = [r for r, p in enumerate(prompts) if p is not None]
    if not chosen:
        raise ValueError("a ragged prefill needs at least one prompt")
    device = cache.keys.device
    window = RaggedWindow.prompts([prompts[r] for r in chosen], pad_id, device)
    rows = None if len(chosen) == cache.batch else torch.tensor(chosen, device=cache.lengths.device)
    starts = cache.lengths.clone() if rows is None else cache.lengths.index_select(0, rows)
    x, features = ragged_hidden(lean, cache, window, layer_ids, rows)
    counts = window.counts().to(starts.device)
    if rows is None:
        cache.lengths.copy_(starts + counts)
    else:
        cache.lengths.index_copy_(0, rows, starts + counts)
    last = (counts - 1).clamp(min=0).to(x.device)
    logits = lean.lm_head(lean.norm(x[torch.arange(x.shape[0], device=x.device), last]))
    if rows is None:
        return logits, features, window.valid
    at = rows.to(x.device)
    full = logits.new_zeros(cache.batch, logits.shape[-1]).index_copy_(0, at, logits)
    valid = window.valid.new_zeros(cache.batch, window.width).index_copy_(0, at.to(window.valid.device), window.valid)
    if features is not None:
        features = features.new_zeros(cache.batch, *features.shape[1:]).index_copy_(0, at, features)
    return full, features, valid
