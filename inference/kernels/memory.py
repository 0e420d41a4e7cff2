"""The memory-bound limit of a decode step: the bytes of weights one token's forward must read, and how
fast this machine reads memory. A one-token step cannot beat bytes / bandwidth; how far above it `ar`
runs is the engine's overhead, which a verify pays once for many tokens (and which flatters speedups).
"""

from __future__ import annotations

import time

import torch
from torch import nn

READ_BYTES = 512 * 2**20  # past every last-level cache seen


@torch.inference_mode()
def read_bandwidth(repeats: int = 5) -> float:
    """Bytes per second of the fastest of `repeats` reductions over 512 MiB (all threads)."""
    x = torch.ones(READ_BYTES // 4, dtype=torch.float32)
    x.sum()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return READ_BYTES / best


def step_bytes(target: object) -> int:
    """Weight bytes one decode step reads: every linear the forward runs (in the layout its one-row
    kernel reads) plus one embedding row per token (negligible, left out)."""
    linears = target.lean.linear_modules() if getattr(target, "lean", None) is not None else None
    if linears is None:
        head = target.model.get_output_embeddings()
        linears = [m for m in target.model.modules() if isinstance(m, nn.Linear) or hasattr(m, "plan")]
        linears = linears if head in linears else [*linears, head]
    total = 0
    for m in linears:
        n = m.out_features * m.in_features
        kernel = getattr(m, "plan", {}).get(1)
        itemsize = 2 if kernel == "bf16w" else m.weight.element_size()
        total += n * itemsize
    return total
