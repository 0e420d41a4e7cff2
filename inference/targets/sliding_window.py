"""Sliding-window attention as a mask by position, over a KV cache that keeps every entry.

A sliding layer lets a query at position p see the keys at positions > p - window. Transformers' own
sliding cache layer drops the entries that left the window, so it cannot be cropped back after a rejected
draft, and tree compaction would index it by absolute position. Both engines instead keep every entry and
mask the ones outside the window: the lean engine for a window every layer shares (Mistral), HF's forward
for targets whose sliding and full layers alternate (Gemma 2 / 3, Qwen2 with `max_window_layers`), where
`kv_cache.new_cache` keeps every entry of the sliding layers too and `hf_attention_mask` gives each layer
type its own mask. Chains and trees then decode past the window, and a tree node sees exactly what `ar`
sees at its position.
"""

from __future__ import annotations

import torch

FULL, SLIDING = "full_attention", "sliding_attention"


def layer_kinds(config: object) -> set[str]:
    """The attention kinds of the target's layers (`layer_types`); empty when the config does not list them."""
    return set(getattr(config, "layer_types", None) or [])


def sliding_window(config: object) -> int | None:
    """The window the target's sliding layers attend within, or None when no layer slides."""
    window = getattr(config, "sliding_window", None)
    if layer_kinds(config) == {FULL} or not window or not getattr(config, "use_sliding_window", True):
        return None
    return int(window)


def window_mask(
    mask: torch.Tensor | None, position_ids: torch.Tensor, start: int, window: int, dtype: torch.dtype
) -> torch.Tensor:
    """`mask` (additive, [b or 1, 1, q, start + q], or None for no other restriction) with every key at a
    position <= the query's - `window` masked out. The cached entries' positions are their indices (the
    cache holds the committed prefix in order); the new entries' are `position_ids` [b, q] (a tree node's
    depth, not its index)."""
    b, q = position_ids.shape
    cached = torch.arange(start, device=position_ids.device).expand(b, start)
    keys = torch.cat([cached, position_ids], dim=1)  # [b, total]
    outside = keys.unsqueeze(1) <= position_ids.unsqueeze(2) - window  # [b, q, total]
    total = start + q
    base = torch.zeros(b, 1, q, total, dtype=dtype, device=keys.device) if mask is None else mask
    return base.expand(b, 1, q, total).masked_fill(outside.unsqueeze(1), torch.finfo(dtype).min)


def hf_attention_mask(
    config: object, mask: torch.Tensor, position_ids: torch.Tensor, start: int
) -> torch.Tensor | dict[str, torch.Tensor]:
    """What HF's forward takes for a prepared 4-D `mask` (a tree verification) after `start` cached
    entries: `mask` itself without sliding layers, the windowed mask when every layer slides, and one mask
    per layer type (the form Gemma 2 / 3 and Qwen2 accept) when both kinds are present. HF applies a 4-D
    mask as given, so without this a sliding layer would see the whole cache in a tree window."""
    window = sliding_window(config)
    if window is None:
        return mask
    windowed = window_mask(mask, position_ids, start, window, mask.dtype)
    if layer_kinds(config) <= {SLIDING}:
        return windowed
    return {FULL: mask, SLIDING: windowed}
