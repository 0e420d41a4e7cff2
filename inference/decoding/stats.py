"""Per-generation statistics and the stage clock that fills them.

`tau` follows the SGLang convention: tokens committed by verify rounds divided by the number of verify
rounds, the bonus token included, so a drafter that never agrees with the target scores 1 and a chain
of D draft tokens scores at most D + 1. The first token (sampled from the prefill) belongs to no round.
When a stop token or the token limit truncates a round, the round counts only what it emitted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch


@dataclass
class GenerationStats:
    """What one generation cost and how much each verify round committed."""

    prompt_tokens: int
    output_tokens: int = 0
    accept_lengths: list[int] = field(default_factory=list)  # tokens committed per verify round (bonus included)
    prefill_s: float = 0.0  # prompt forward + first token
    decode_s: float = 0.0  # everything after the first token: the time speedups are measured on
    draft_s: float = 0.0  # drafter forward + chain rollout (speculative methods only)
    verify_s: float = 0.0  # target forward over the draft + acceptance rule
    commit_s: float = 0.0  # cache crop / compaction + context projection of the committed positions
    draft_parts_s: dict[str, float] = field(default_factory=dict)  # the draft split further (trees: backbone, build)
    draft_sizes: list[int] = field(default_factory=list)  # per round: drafts verified (tree nodes, chain tokens)
    predicted: list[float] = field(default_factory=list)  # per round: expected tokens (calibrated acceptance)
    plain_rounds: int = 0  # cost-aware rounds decoded without a draft because drafting did not pay (draft_gate.py)
    own_argmax_violations: int = 0  # greedy: committed tokens that are not the argmax of their own verify logits

    @property
    def rounds(self) -> int:
        return len(self.accept_lengths)

    @property
    def tau(self) -> float | None:
        """Mean tokens committed per verify round; None when no round ran (e.g. max_new_tokens = 1)."""
        return sum(self.accept_lengths) / self.rounds if self.rounds else None

    def stage_seconds(self) -> dict[str, float]:
        return {
            "prefill": self.prefill_s,
            "decode": self.decode_s,
            "draft": self.draft_s,
            "verify": self.verify_s,
            "commit": self.commit_s,
            **{f"draft.{part}": seconds for part, seconds in self.draft_parts_s.items()},
        }


class StageClock:
    """`time.perf_counter`, synchronising the accelerator first when `sync` is on (CUDA only).

    On a GPU the stage split needs a synchronisation per stage boundary (a few per round); with
    `sync=False` only the totals that end on a host read are exact.
    """

    def __init__(self, device: torch.device | str, sync: bool = True) -> None:
        self._sync = sync and torch.device(device).type == "cuda"

    def now(self) -> float:
        if self._sync:
            torch.cuda.synchronize()
        return time.perf_counter()
