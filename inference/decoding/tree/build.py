"""Best-first draft trees: DDTree (path-independent marginals) and DominoTree (path-conditional scores).

Both trees come from one heap (`best_first`): priority = log-probability of the root-to-node path; pop
the best candidate, add it to the tree, push its next sibling and its first child; stop at the node
budget. They differ only in the children a node gets (`Expander`):
- DDTree: at depth d every node has the same children, the backbone's top-k at draft position d.
- DominoTree: a node's children are scored with the Domino correction computed from *its own* GRU state
  (the state after consuming the root and the tokens on its path); children at draft position
  j <= `pure_draft_prefix_len` use base logits. With top-M, once per round the backbone's top-M ids of
  each position are fixed; a node's children are the `node_topk` best of the corrected logits over those
  M, log-softmaxed over the M. A child's state is one GRU step from its parent's, computed for all
  `node_topk` children together when the parent is expanded.

`ReferenceDominoExpander` is the clear, direct implementation; `expander.FastDominoExpander` does the
same arithmetic on static buffers (replayable as CUDA graphs) and must build identical trees.
"""

from __future__ import annotations

import heapq
from itertools import count
from typing import Protocol

import torch

from inference.decoding.tree.draft_tree import DraftTree

Children = tuple[list[int], list[float]]  # tokens and their log-probabilities, best first


class Expander(Protocol):
    def root(self) -> Children:
        """The root's children (draft position 1)."""

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        """Children (at depth + 1) of `node`, the `rank`-th child of `parent` (-1 = the root)."""


def best_first(expander: Expander, budget: int, max_depth: int) -> DraftTree:
    """The `budget` best nodes under the expander's scores (ties: the earlier-pushed candidate wins)."""
    tree = DraftTree()
    if budget < 1 or max_depth < 1:
        return tree
    kids: dict[int, Children] = {-1: expander.root()}
    score: dict[int, float] = {-1: 0.0}
    order = count()
    heap = [(-kids[-1][1][0], next(order), -1, 1, 0)]
    while heap and len(tree) < budget:
        _, _, parent, depth, rank = heapq.heappop(heap)
        tokens, logprobs = kids[parent]
        node = tree.add(tokens[rank], parent, depth, score[parent] + logprobs[rank])
        score[node] = tree.scores[node]
        if rank + 1 < len(tokens):
            heapq.heappush(heap, (-(score[parent] + logprobs[rank + 1]), next(order), parent, depth, rank + 1))
        if depth < max_depth and len(tree) < budget:
            kids[node] = expander.expand(node, parent, rank, depth)
            heapq.heappush(heap, (-(score[node] + kids[node][1][0]), next(order), node, depth + 1, 0))
    return tree


def topk_logprobs(
    logits: torch.Tensor, k: int, candidates: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, ids) of the k best tokens; log-softmax over `candidates` [M] when given, else the vocab."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    values, idx = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)
    return values, (idx if candidates is None else candidates[idx])


class DDTreeExpander:
    """Path-independent children: the top-k of the base marginal at each draft position.

    `token_map` [N]: the target id of each logit column (a draft vocabulary); None = columns are target ids.
    """

    def __init__(self, base_logits: torch.Tensor, k: int, token_map: torch.Tensor | None = None) -> None:
        values, ids = topk_logprobs(base_logits, k, token_map)  # [D, k]; one host read per round
        self.lists = [(i, v) for i, v in zip(ids.tolist(), values.tolist(), strict=True)]

    def root(self) -> Children:
        return self.lists[0]

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        return self.lists[depth]


def build_ddtree(
    base_logits: torch.Tensor, budget: int, max_depth: int | None = None, token_map: torch.Tensor | None = None
) -> DraftTree:
    """DDTree over base logits [D, V] (or [D, N] with `token_map`): the `budget` most probable prefixes
    under the factorised marginals."""
    depth = base_logits.shape[0] if max_depth is None else min(max_depth, base_logits.shape[0])
    return best_first(DDTreeExpander(base_logits, budget, token_map), budget, depth)


class ReferenceDominoExpander:
    """DominoTree children, computed directly from the head (clarity first; see the module docstring).

    head: `init_state`, `step`, `correction` (a `DominoHead`); embed: token ids -> target embeddings;
    hidden [D, H], base_logits [D, V]: the backbone's draft positions; root [1]: the last committed token;
    token_map [N]: the target id of each logit column when the drafter has a draft vocabulary (the top-M
    and W2 rows stay in draft ids, the children are target ids).
    """

    def __init__(
        self,
        head,  # noqa: ANN001 - any object with the DominoHead methods
        embed,  # noqa: ANN001 - callable ids -> embeddings
        hidden: torch.Tensor,
        base_logits: torch.Tensor,
        root: torch.Tensor,
        prefix_len: int,
        top_m: int = 64,
        node_topk: int = 8,
        token_map: torch.Tensor | None = None,
    ) -> None:
        self.head, self.embed, self.hidden, self.base = head, embed, hidden, base_logits
        self.prefix_len, self.node_topk, self.token_map = prefix_len, node_topk, token_map
        self.candidates = [base_logits[d].topk(top_m).indices if top_m else None for d in range(len(base_logits))]
        init = head.init_state(1, hidden.device, hidden.dtype)
        self.root_state = head.step(embed(root).to(hidden.dtype), init)
        self.child_states: dict[int, torch.Tensor] = {}  # parent -> [k, G], by rank
        self.node_state: dict[int, torch.Tensor] = {-1: self.root_state}

    def _children(self, key: int, state: torch.Tensor, position: int) -> Children:
        """Children at draft position `position` (1-based) of a node with GRU `state` [1, G]."""
        d = position - 1
        tmap = self.token_map
        if position <= self.prefix_len:
            values, ids = topk_logprobs(self.base[d], self.node_topk, tmap)
        else:
            cand = self.candidates[d]
            logits = self.base[d] if cand is None else self.base[d, cand]
            logits = logits + self.head.correction(self.hidden[d : d + 1], state, cand)[0]
            names = tmap if cand is None else (cand if tmap is None else tmap[cand])
            values, ids = topk_logprobs(logits, self.node_topk, names)
        embeds = self.embed(ids).to(state.dtype)
        self.child_states[key] = self.head.step(embeds, state.expand(len(ids), -1))
        return ids.tolist(), values.tolist()

    def root(self) -> Children:
        return self._children(-1, self.root_state, 1)

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        state = self.child_states[parent][rank : rank + 1]
        self.node_state[node] = state
        return self._children(node, state, depth + 1)


def build_dominotree_reference(
    head,  # noqa: ANN001
    embed,  # noqa: ANN001
    hidden: torch.Tensor,
    base_logits: torch.Tensor,
    root: torch.Tensor,
    prefix_len: int,
    budget: int = 16,
    top_m: int = 64,
    node_topk: int = 8,
    max_depth: int | None = None,
    token_map: torch.Tensor | None = None,
) -> DraftTree:
    """DominoTree with the reference expander (see `ReferenceDominoExpander`)."""
    expander = ReferenceDominoExpander(head, embed, hidden, base_logits, root, prefix_len, top_m, node_topk, token_map)
    depth = hidden.shape[0] if max_depth is None else min(max_depth, hidden.shape[0])
    return best_first(expander, budget, depth)
