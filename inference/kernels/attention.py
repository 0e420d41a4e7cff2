"""Grouped-query attention over a few queries on a CPU: the layout chosen by measurement.

A decode step or a narrow verify attends with few queries per sequence. PyTorch's CPU SDPA with grouped
KV heads (`enable_gqa=True`) computes one query row per (sequence, query head), and for one query in bf16
it takes a slow path: on 2 AMD EPYC (Zen 4) cores, SmolLM2's 9 query / 3 KV heads over 1,000 keys took
556 us per layer, where the same arithmetic laid out as 3 KV heads with 3 query rows each (the query heads
of one KV head folded into the query axis) took 101 us; over 1,000 keys at batch 4, 1,990 against 288.
In fp32 the one-query path is fast, and folding loses at short contexts (14 against 22 us at 100 keys).
So the layout is measured, per query count up to `FOLD_MAX_QUERIES`, on the target's own head shape
(`measure_folding`), and the forward folds the counts where folding won (`attend`). Other devices keep
SDPA's grouped path: their kernels read grouped KV heads in place.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

FOLD_MAX_QUERIES = 8  # wider windows (tree verifies, prefills) were as fast either way
# (batch, keys) the layouts are timed at; the sums decide, so a long context weighs more
SHAPES = ((1, 128), (4, 1024))


def fold_mask(mask: torch.Tensor | None, groups: int) -> torch.Tensor | None:
    """An additive mask [b or 1, 1, n, L] for the folded layout: rows (head of the group, query), each
    group repeating the mask. One query's mask broadcasts as it is. Built once per forward, not per layer."""
    if mask is None or mask.shape[2] == 1 or groups == 1:
        return mask
    rows, n, keys = mask.shape[0], mask.shape[2], mask.shape[3]
    return mask.expand(rows, groups, n, keys).reshape(rows, 1, groups * n, keys)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    fold: bool = False,
) -> torch.Tensor:
    """SDPA of queries [b, H, n, d] over grouped keys / values [b, KV, L, d] under an additive `mask`
    [b or 1, 1, n, L] (or None); `fold`: run the H / KV query heads of each KV head as n x H / KV query
    rows of one head (same result, another kernel), under a mask already folded by `fold_mask`."""
    b, heads, n, d = q.shape
    groups = heads // k.shape[1]
    if not fold or groups == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=groups > 1)
    out = F.scaled_dot_product_attention(q.reshape(b, k.shape[1], groups * n, d), k, v, attn_mask=mask, scale=scale)
    return out.view(b, heads, n, d)


@torch.inference_mode()
def measure_folding(
    num_heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device | str, repeats: int = 5
) -> frozenset[int]:
    """The query counts (1..`FOLD_MAX_QUERIES`) at which the folded layout ran faster than SDPA's grouped
    one on this machine, summed over `SHAPES`; empty off the CPU or without grouped heads. Each layout's
    time is the fastest of `repeats` calls (the minimum: see `table.py`)."""
    if torch.device(device).type != "cpu" or kv_heads == num_heads:
        return frozenset()
    folded = set()
    for n in range(1, FOLD_MAX_QUERIES + 1):
        totals = [0.0, 0.0]
        for b, keys in SHAPES:
            q = torch.randn(b, num_heads, n, head_dim, dtype=dtype, device=device)
            k = torch.randn(b, kv_heads, keys + n, head_dim, dtype=dtype, device=device)
            v = torch.randn_like(k)
            mask = torch.zeros(b, 1, n, keys + n, dtype=dtype, device=device)
            for i, fold in enumerate((False, True)):
                layout_mask = fold_mask(mask, num_heads // kv_heads) if fold else mask
                times = []
                for _ in range(repeats + 2):
                    t0 = time.perf_counter()
                    attend(q, k, v, layout_mask, head_dim**-0.5, fold)
                    times.append(time.perf_counter() - t0)
                totals[i] += min(times[2:])
        if totals[1] < totals[0]:
            folded.add(n)
    return frozenset(folded)
