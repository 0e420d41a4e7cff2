"""Per-generation statistics and the stage clock that fills them.

`tau` follows the SGLang convention: tokens committed by verify rounds divided by the number of verify
rounds, the bonus token included, so a drafter that never agrees with the target scores 1 and a chain
of D draft tokens scores at most D + 1. The first token (sampled from the prefill) belongs to no round.
When a stop token or the token limit truncates a round, the round counts only what it emitted.

Accepted-after-sibling rate (tree methods; chains leave its counters 0): in each verify round the accepted
path of the tree is walked node by node, the root excluded. Every accepted node that has children in the
verified tree is one step, an opportunity for the walk to go one deeper; a node without children is none,
since nothing was drafted below it. The step is `sibling` when the node is not its parent's first child
(the best-scored one: the builder adds a parent's children in score-rank order), else `main`; it is
accepted when the walk accepted one of the node's children. The counters describe the verification walk
(a stop token that cuts the round's emitted tokens does not change them). `walk_rates` turns them into
the rates `main` and `sibling`: a drafter whose guess below a sibling branch is much worse than below the
main path is what DominoTree's path-conditional scores are meant to fix.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
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
    round_s: list[float] = field(default_factory=list)  # per round: wall seconds (a batch's whole round)
    plain_rounds: int = 0  # cost-aware rounds decoded without a draft because drafting did not pay (draft_gate.py)
    own_argmax_violations: int = 0  # greedy: committed tokens that are not the argmax of their own verify logits
    main_steps: int = 0  # tree walks: accepted first children that have children (module docstring)
    main_accepted: int = 0  # main steps after which the walk accepted a child
    sibling_steps: int = 0  # tree walks: accepted non-first children that have children
    sibling_accepted: int = 0  # sibling steps after which the walk accepted a child

    @property
    def rounds(self) -> int:
        return len(self.accept_lengths)

    @property
    def tau(self) -> float | None:
        """Mean tokens committed per verify round; None when no round ran (e.g. max_new_tokens = 1)."""
        return sum(self.accept_lengths) / self.rounds if self.rounds else None

    def count_step(self, sibling: bool, accepted: bool) -> None:
        """Record one step of a tree walk (module docstring): below a sibling or a main-path node."""
        if sibling:
            self.sibling_steps += 1
            self.sibling_accepted += accepted
        else:
            self.main_steps += 1
            self.main_accepted += accepted

    def stage_seconds(self) -> dict[str, float]:
        return {
            "prefill": self.prefill_s,
            "decode": self.decode_s,
            "draft": self.draft_s,
            "verify": self.verify_s,
            "commit": self.commit_s,
            **{f"draft.{part}": seconds for part, seconds in self.draft_parts_s.items()},
        }


def walk_rates(stats: Iterable[GenerationStats]) -> dict[str, float | int | None]:
    """The accepted-after-sibling rate and its main-path counterpart over several generations (module
    docstring): accepted / steps for `main` and `sibling` (None without a step), and the step counts."""
    stats = list(stats)
    out: dict[str, float | int | None] = {}
    for kind in ("main", "sibling"):
        steps = sum(getattr(s, f"{kind}_steps") for s in stats)
        accepted = sum(getattr(s, f"{kind}_accepted") for s in stats)
        out[kind], out[f"{kind}_steps"] = (accepted / steps if steps else None), steps
    return out


class StageClock:
    """`time.perf_counter`, synchronising the accelerator first when `sync` is on (CUDA only).

    On a GPU the stage split needs a synchronisation per stage boundary (a few per round); with
    `sync=False` only the totals that end on a host read are exact.
    """

    def __init__(self, device: torch.device | str, sync: bool = True) -> None:
        self._sync = sync and torch.device(device).type == "cuda"
        # whether an interval between two reads is the device's time, not only the host's launches
        self.exact = sync or torch.device(device).type != "cuda"

    def now(self) -> float:
        if self._sync:
            torch.cuda.synchronize()
        return time.perf_counter()
