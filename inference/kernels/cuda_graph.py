"""Replay fixed work as CUDA graphs: the target's fixed-width decode steps (`engine: graphed`), the
per-round and per-node steps of tree building and the chain rollout read and write only pre-allocated
("static") tensors, so each can be captured once and replayed with a single launch instead of dozens of
small kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

CUDA_GRAPH_MODES = ("auto", "on", "off")


def use_cuda_graphs(mode: str, device: torch.device | str) -> bool:
    """`auto`: on when the device is CUDA; `on` insists (error elsewhere); `off` never."""
    if mode not in CUDA_GRAPH_MODES:
        raise ValueError(f"cuda_graph must be one of {CUDA_GRAPH_MODES}, got {mode!r}")
    is_cuda = torch.device(device).type == "cuda"
    if mode == "on" and not is_cuda:
        raise ValueError("cuda_graph=on needs a CUDA device; use auto or off on this device")
    return mode != "off" and is_cuda


class StaticStep:
    """`fn()` computes from static inputs into static outputs; run eagerly, or captured on first use and
    replayed afterwards. Capture follows PyTorch's recipe: warm up on a side stream, then record; so the
    first call runs `fn` `warmup` times and replays once, and `fn` must give the same result when rerun.
    Steps that share a `pool` (`torch.cuda.graph_pool_handle()`) share their graphs' memory."""

    def __init__(self, fn: Callable[[], None], graph: bool, warmup: int = 2, pool: tuple | None = None) -> None:
        self.fn, self.use_graph, self.warmup, self.pool = fn, graph, warmup, pool
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self) -> None:
        if not self.use_graph:
            self.fn()
            return
        if self.graph is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(self.warmup):
                    self.fn()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=self.pool):
                self.fn()
        self.graph.replay()
