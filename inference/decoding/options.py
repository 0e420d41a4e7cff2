"""The typed options of a decoder: `DecodeOptions` for every method, `TreeOptions` for the tree methods.

Each is checked when it is built, so `domino-decode` refuses a bad value before any model loads, and a
decoder constructor receives one object instead of a list of loose arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from inference.decoding.budget import AUTO
from inference.decoding.sampling import SamplingParams
from inference.kernels.cuda_graph import CUDA_GRAPH_MODES


@dataclass(frozen=True)
class DecodeOptions:
    """How a decoder runs, beyond its models."""

    sampling: SamplingParams = field(default_factory=SamplingParams)
    verify: str = "match"  # the acceptance rule; a method's accepted rules: DECODING_METHODS[m].verify_rules
    stop_token_ids: Iterable[int] | None = None  # None = the target's own stop tokens; stored as a frozenset
    max_context: int | None = None  # positions a prompt + its output may use; None = the target's limit
    sync_stages: bool = True  # on CUDA, synchronise at stage boundaries so the draft / verify split is real
    cuda_graph: str = "auto"  # auto | on | off: replay the chain rollout and tree expansions as CUDA graphs
    chain_window: int | str | None = None  # chains: drafts verified per round; None = the block, "auto" = cost-aware
    draft_gate: bool = True  # cost-aware decoders: plain rounds while drafting does not pay (False: always draft)

    def __post_init__(self) -> None:
        if not isinstance(self.sampling, SamplingParams):
            raise TypeError(f"sampling must be a SamplingParams, got {type(self.sampling).__name__}")
        if self.cuda_graph not in CUDA_GRAPH_MODES:
            raise ValueError(f"cuda_graph must be one of {CUDA_GRAPH_MODES}, got {self.cuda_graph!r}")
        if not isinstance(self.draft_gate, bool):
            raise ValueError(f"draft_gate must be true or false, got {self.draft_gate!r}")
        if self.max_context is not None and self.max_context < 1:
            raise ValueError(f"max_context must be >= 1 position (or None for the target's), got {self.max_context}")
        if self.stop_token_ids is not None:
            object.__setattr__(self, "stop_token_ids", frozenset(int(t) for t in self.stop_token_ids))
        window = self.chain_window
        if window is not None and window != AUTO and (not isinstance(window, int) or window < 0):
            raise ValueError(f"chain window must be auto, null (the whole block) or >= 0 drafts, got {window!r}")


@dataclass(frozen=True)
class TreeOptions:
    """The draft tree of `ddtree` and `dominotree`."""

    budget: int | str = 16  # draft nodes per round, the root excluded; "auto": the cost-aware prefix of max_budget
    top_m: int = 64  # dominotree: candidates per draft position, fixed once per round (0 = whole vocabulary)
    node_topk: int = 8  # dominotree: children scored per expanded node
    expand_width: int = 8  # dominotree: frontier nodes expanded per head step (the tree is the same for any)
    max_budget: int = 32  # budget auto: the largest tree a round may verify

    def __post_init__(self) -> None:
        if self.budget != AUTO and (not isinstance(self.budget, int) or self.budget < 1):
            raise ValueError(f"tree budget must be auto or >= 1 node, got {self.budget!r}")
        if self.max_budget < 1:
            raise ValueError(f"tree max_budget must be >= 1 node, got {self.max_budget}")
        if self.top_m < 0:
            raise ValueError(f"tree top_m must be >= 0 (0 = the whole vocabulary), got {self.top_m}")
        if self.node_topk < 1:
            raise ValueError(f"tree node_topk must be >= 1 child per node, got {self.node_topk}")
        if self.expand_width < 1:
            raise ValueError(f"tree expand_width must be >= 1 node per head step, got {self.expand_width}")
