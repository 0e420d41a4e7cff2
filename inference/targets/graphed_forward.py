"""`GraphedForward`: the lean engine's decode steps at fixed widths, captured once as CUDA graphs and
replayed (`engine: graphed`, the default on a GPU).

On a GPU an eager batch-1 forward is bound by kernel launches (about ten per layer, each launched in
more time than it computes), so a one-token step and a 16-token verify cost about the same and every
speedup measured on it flatters speculation; SGLang and gpt-fast capture their decode forward for this
reason. A graph fixes every shape and address, so a step of q new tokens here
- is padded to its width bucket W >= q (`WIDTHS`); the pad rows are computed and dropped;
- writes its keys and values at slots `start .. start + W` of the cache's storage by index (a tensor
  input of the graph), and
- attends over the storage's whole capacity under an additive mask that hides every slot the lean loop
  would not show the query: empty slots, the pad rows, and what the caller's mask (causal, padding, tree)
  and the sliding window hide. A pad row sees slot 0 only, so its softmax stays finite.
A slot is always written by a real row before any real row sees it, so what pad rows leave behind is
never read. Logits come back for the q real rows (a copy: the next replay overwrites the graph's output).

Graphs are keyed by the cache storage's address and shape, the batch, W and the feature layers. Capacities
are rounded up to a power of two, so the caching allocator hands a finished sequence's storage to the next
cache of the same size and a run captures each width once; at most `MAX_GRAPHS` are kept (oldest dropped).
Steps wider than the largest bucket (prefill) run the lean loop eagerly into the same storage.
`capture=False` runs the same fixed-width steps uncaptured: the CPU tests prove with it that this path
decodes what the lean loop decodes.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from torch import nn

from inference.kernels.cuda_graph import StaticStep
from inference.targets.lean_forward import LeanForward
from inference.targets.static_cache import DEFAULT_CAPACITY, StaticKVCache

WIDTHS = (1, 2, 4, 8, 16, 32)
MAX_GRAPHS = 64


@dataclass
class _Step:
    """One captured width: its static inputs, its outputs and the graph (or eager function) between them."""

    ids: torch.Tensor  # [b, W]
    positions: torch.Tensor  # [b, W]
    slots: torch.Tensor  # [W]: the storage slots the step writes
    mask: torch.Tensor  # [b, 1, W, capacity], additive
    logits: torch.Tensor | None = None
    features: torch.Tensor | None = None
    run: StaticStep | None = field(default=None, repr=False)


class GraphedForward:
    """The lean loop (`lean`) with its steps of up to `WIDTHS[-1]` tokens replayed at fixed widths."""

    def __init__(self, lean: LeanForward, capture: bool = True) -> None:
        if capture and lean.lm_head.weight.device.type != "cuda":
            raise ValueError("engine=graphed captures CUDA graphs and needs the target on a CUDA device")
        self.lean, self.capture = lean, capture
        self._steps: OrderedDict[tuple, _Step] = OrderedDict()
        self._pool = torch.cuda.graph_pool_handle() if capture else None
        self.captured = 0
        self.capture_seconds = 0.0

    @property
    def lm_head(self) -> nn.Module:
        return self.lean.lm_head

    @property
    def config(self) -> object:
        return self.lean.config

    def linear_modules(self) -> list[nn.Module]:
        return self.lean.linear_modules()

    def new_cache(self, capacity: int | None = None) -> StaticKVCache:
        """A static cache whose capacity (rounded up to a power of two) leaves room for a padded step."""
        needed = (capacity or DEFAULT_CAPACITY) + WIDTHS[-1]
        return self.lean.new_cache(1 << (needed - 1).bit_length())

    @torch.inference_mode()
    def __call__(
        self,
        input_ids: torch.Tensor,
        cache: StaticKVCache,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        layer_ids: list[int] | None = None,
        last_logits_only: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As `LeanForward.__call__`; steps of up to `WIDTHS[-1]` tokens replay their width's graph."""
        b, q = input_ids.shape
        if q > WIDTHS[-1]:
            return self.lean(input_ids, cache, position_ids, attention_mask, layer_ids, last_logits_only)
        width = next(w for w in WIDTHS if w >= q)
        start = cache.length
        cache.reserve(b, start + width)
        if position_ids is None:
            position_ids = torch.arange(start, start + q, device=input_ids.device).expand(b, q)
        step, fresh = self._step(cache, b, width, tuple(layer_ids or ()))
        step.ids[:, :q].copy_(input_ids)
        step.ids[:, q:].copy_(input_ids[:, -1:])
        step.positions[:, :q].copy_(position_ids)
        step.positions[:, q:].copy_(position_ids[:, -1:])
        torch.add(torch.arange(width, device=step.slots.device), start, out=step.slots)
        visible = self.lean.step_mask(attention_mask, position_ids, b, start, step.mask.dtype)
        step.mask.fill_(torch.finfo(step.mask.dtype).min)
        step.mask[:, :, :q, : start + q] = 0 if visible is None else visible
        step.mask[:, :, q:, 0] = 0
        began = time.perf_counter()
        step.run()  # a fresh step captures here (on real inputs: the step may rerun, it writes what it wrote)
        if fresh and self.capture:
            torch.cuda.synchronize()
            self.captured += 1
            self.capture_seconds += time.perf_counter() - began
        cache.length = start + q
        logits = step.logits[:, q - 1 : q] if last_logits_only else step.logits[:, :q]
        features = None if step.features is None else step.features[:, :q].clone()
        return logits.clone(), features

    def _step(self, cache: StaticKVCache, b: int, width: int, layer_ids: tuple[int, ...]) -> tuple[_Step, bool]:
        """The step of this storage, batch, width and feature layers, and whether it is new."""
        key = (cache.keys.data_ptr(), cache.values.data_ptr(), tuple(cache.keys.shape), b, width, layer_ids)
        step = self._steps.get(key)
        if step is not None:
            self._steps.move_to_end(key)
            return step, False
        device, capacity = cache.keys.device, cache.keys.shape[3]
        ids = torch.zeros(b, width, dtype=torch.long, device=device)
        step = _Step(
            ids=ids,
            positions=torch.zeros_like(ids),
            slots=torch.zeros(width, dtype=torch.long, device=device),
            mask=torch.zeros(b, 1, width, capacity, dtype=cache.keys.dtype, device=device),
        )
        keys, values = cache.keys, cache.values
        lean = self.lean

        def forward() -> None:
            x = lean.embed_tokens(step.ids)

            def attend_to(i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                keys[i].index_copy_(2, step.slots, k)
                values[i].index_copy_(2, step.slots, v)
                return keys[i], values[i]

            x, features = lean.layers_forward(x, step.positions, step.mask, attend_to, list(layer_ids))
            step.logits, step.features = lean.lm_head(lean.norm(x)), features

        step.run = StaticStep(forward, self.capture, pool=self._pool)
        self._steps[key] = step
        if len(self._steps) > MAX_GRAPHS:
            self._steps.popitem(last=False)
        return step, True
