"""Best-first draft trees: DDTree (path-independent marginals) and DominoTree (path-conditional scores).

Both trees come from one heap (`best_first`): priority = log-probability of the root-to-node path; pop
the best candidate, add it to the tree, push its next sibling and its first child; stop at the node
budget. They differ only in the children a node gets (`Expander`):
- DDTree: at depth d every node has the same children, the backbone's top-k at draft position d.
- DominoTree: a node's children are scored with the Domino correction computed from *its own* GRU state
  (the state after consuming the root and the tokens on its path); children at draft position
  j <= `pure_draft_prefix_len` use base logits. With top-M, once per round the backbone's top-M ids of
  each position are fixed; a node's children are the `node_topk` best of the corrected logits over those
  M, log-softmaxed over the M. A node's state is one GRU step from its parent's over its own token,
  taken when the node is expanded (leaves never pay for one).

`ReferenceDominoExpander` is the clear, direct implementation; `expander.FastDominoExpander` does the
same arithmetic on static buffers (replayable as CUDA graphs) and builds the same trees.

A DominoTree node's expansion is one small head step, and on a CPU (or a GPU without graphs) its cost
is fixed overhead whatever the number of rows: `best_first_batched` expands up to `width` frontier nodes
per head step (`Expander.expand_many`). It speculates: it pops the `width` best candidates at once and
expands them together, until no unexpanded candidate can still enter the top `budget`; then the
sequential `best_first` replays over the children already computed (expanding one at a time any it
lacks). The tree is therefore exactly the sequential one, ties included; only the work is grouped.
Given `enough` (a cost-aware round's `budget.prefix_settled`), it also stops once the nodes that surely
lead the best-first order are enough, and the tree is the sequential one of that size. `best_first_rows`
runs that speculation for every row of a batched round in step (a generator per row, `_speculate`), so
that one `expand_rows` call computes every row's next nodes; each row's tree is still its sequential one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from dataclasses import dataclass
from itertools import count
from typing import Any, Protocol

import torch

from inference.decoding.tree.draft_tree import DraftTree

Children = tuple[list[int], list[float]]  # tokens and their log-probabilities, best first


class Expander(Protocol):
    def root(self) -> Children:
        """The root's children (draft position 1)."""

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        """Children (at depth + 1) of `node`, the `rank`-th child of `parent` (-1 = the root)."""


class BatchExpander(Expander, Protocol):
    def expand_many(self, requests: list[tuple[int, int, int, int]]) -> list[Children]:
        """`expand(*request)` for each (node, parent, rank, depth), computed together."""


class RowsExpander(Protocol):
    def row(self, r: int) -> Expander:
        """Row r's expander (its root's children, and one node at a time)."""

    def expand_rows(self, requests: list[tuple[int, tuple[int, int, int, int]]]) -> list[Children]:
        """`row(r).expand(*request)` for each (r, request), computed together."""


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


class _Replay:
    """The children `best_first_batched` computed, under the node numbers of a sequential `best_first`;
    a node it did not expand is expanded now, under a fresh key."""

    def __init__(self, expander: Expander, kids: dict[int, Children], child_key: dict[tuple[int, int], int]) -> None:
        self.expander, self.kids, self.child_key = expander, kids, child_key
        self.key = {-1: -1}  # sequential node -> speculative key
        self.fresh = count(max(kids) + 1)

    def root(self) -> Children:
        return self.kids[-1]

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        parent_key = self.key[parent]
        key = self.child_key.setdefault((parent_key, rank), next(self.fresh))
        self.key[node] = key
        if key not in self.kids:
            self.kids[key] = self.expander.expand(key, parent_key, rank, depth)
        return self.kids[key]


@dataclass(frozen=True)
class Leading:
    """What a row's speculation knows after a step: the nodes that surely come first in its best-first order
    (their path scores, best first, and depths), and a bound on the score of every other node it could
    still add (-inf: it can add none)."""

    scores: list[float]
    depths: list[int]
    bound: float


Judge = Callable[[list[float], list[int], float], bool]  # `best_first_batched`'s `enough`
RowsJudge = Callable[[dict[int, Leading]], bool]  # `best_first_rows`'s `enough`


def best_first_batched(
    expander: BatchExpander, budget: int, max_depth: int, width: int = 4, enough: Judge | None = None
) -> DraftTree:
    """`best_first`'s tree, with up to `width` node expansions per `expand_many` call (module docstring).

    `enough(scores, depths, bound)`: after each call, given the nodes that surely come first in best-first
    order (their scores, best first, and depths) and a bound on every other node's score, whether those
    nodes suffice; the tree then holds just them (a prefix of the `budget` tree, up to exact ties)."""
    if width <= 1 and enough is None:
        return best_first(expander, budget, max_depth)
    if budget < 1 or max_depth < 1:
        return DraftTree()
    steps = _speculate(expander.root(), budget, max_depth, width, judged=enough is not None)
    answer: Any = None
    while True:
        try:
            asked = steps.send(answer)
        except StopIteration as done:
            kids, child_key, budget = done.value
            return best_first(_Replay(expander, kids, child_key), budget, max_depth)
        if isinstance(asked, Leading):
            answer = bool(asked.scores) and enough(asked.scores, asked.depths, asked.bound)
        else:
            answer = expander.expand_many(asked)


def best_first_rows(
    expander: RowsExpander, budget: int, depths: list[int], width: int = 4, enough: RowsJudge | None = None
) -> list[DraftTree]:
    """`best_first_batched`'s tree for each of several rows (a batched round's blocks, `depths[r]` deep),
    the rows' speculative expansions in one `expand_rows` call per step: each row pops its own `width`
    best candidates, and the step computes every row's together. Each tree is the one its row builds alone.

    `enough(leading)`: after each step, given every row's `Leading` (a row whose tree is complete: its
    nodes and a bound of -inf), whether the batch holds every node it could use; each row's tree then holds
    just its leading nodes (a prefix of its `budget` tree, up to exact ties; possibly none)."""
    trees: list[DraftTree | None] = [DraftTree() if budget < 1 or d < 1 else None for d in depths]
    leading = {r: Leading([], [], float("-inf")) for r, tree in enumerate(trees) if tree is not None}
    steps = {
        r: _speculate(expander.row(r).root(), budget, d, width, judged=enough is not None)
        for r, d in enumerate(depths)
        if trees[r] is None
    }
    answers: dict[int, Any] = dict.fromkeys(steps)
    while steps:
        asked: dict[int, list] = {}
        pending = answers  # what each row is sent next
        while pending:  # each row runs until it asks for expansions or ends; its reports judged together
            reports: dict[int, Leading] = {}
            for r, answer in pending.items():
                try:
                    got = steps[r].send(answer)
                except StopIteration as done:
                    kids, child_key, size = done.value
                    trees[r] = best_first(_Replay(expander.row(r), kids, child_key), size, depths[r])
                    leading[r] = Leading(trees[r].scores, trees[r].depths, float("-inf"))
                    del steps[r]
                    continue
                if isinstance(got, Leading):
                    reports[r] = leading[r] = got
                else:
                    asked[r] = got
            pending = dict.fromkeys(reports, enough(leading)) if reports else {}
        requests = [(r, request) for r in asked for request in asked[r]]
        computed = iter(expander.expand_rows(requests)) if requests else iter(())
        answers = {r: [next(computed) for _ in asked[r]] for r in asked}
    return trees  # type: ignore[return-value]


def _speculate(
    root: Children, budget: int, max_depth: int, width: int, judged: bool = False
) -> Generator[list[tuple[int, int, int, int]] | Leading, Any, tuple[dict[int, Children], dict, int]]:
    """`best_first_batched`'s speculative phase as a generator: yields each step's expansion requests
    (node, parent, rank, depth) and is sent their children; `judged`: after each step it also yields its
    `Leading` nodes and is sent whether they are enough. Returns the children computed, the keys of
    (parent, rank) and the budget (the leading nodes' count once they are enough)."""
    kids: dict[int, Children] = {-1: root}
    score: dict[int, float] = {-1: 0.0}
    node_depth: dict[int, int] = {}
    child_key: dict[tuple[int, int], int] = {}
    keys, order = count(), count()
    heap = [(-kids[-1][1][0], next(order), -1, 1, 0)]
    best: list[float] = []  # min-heap of the `budget` best popped scores

    def settled() -> bool:  # no candidate left can still enter the top `budget`
        return len(best) == budget and (not heap or -heap[0][0] <= best[0])

    while heap and not settled():
        batch = []
        while heap and len(batch) < width and not settled():
            _, _, parent, depth, rank = heapq.heappop(heap)
            tokens, logprobs = kids[parent]
            key = child_key[(parent, rank)] = next(keys)
            score[key], node_depth[key] = score[parent] + logprobs[rank], depth
            (heapq.heappush if len(best) < budget else heapq.heappushpop)(best, score[key])
            if rank + 1 < len(tokens):
                heapq.heappush(heap, (-(score[parent] + logprobs[rank + 1]), next(order), parent, depth, rank + 1))
            if depth < max_depth:
                batch.append((key, parent, rank, depth))
        for (key, _, _, depth), children in zip(batch, (yield batch) if batch else [], strict=True):
            kids[key] = children
            heapq.heappush(heap, (-(score[key] + children[1][0]), next(order), key, depth + 1, 0))
        if judged and heap:
            bound = -heap[0][0]  # no node outside those popped scores more
            first = sorted((-s, k) for k, s in score.items() if k >= 0 and s > bound)[:budget]
            if (yield Leading([-s for s, _ in first], [node_depth[k] for _, k in first], bound)):
                budget = len(first)
                break
    return kids, child_key, budget


def topk_logprobs(
    logits: torch.Tensor, k: int, candidates: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, ids) of the k best tokens; log-softmax over `candidates` [M] when given, else the vocab."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    values, idx = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)
    return values, (idx if candidates is None else candidates[idx])


def ddtree_children(base_logits: torch.Tensor, k: int, token_map: torch.Tensor | None = None) -> list[list[Children]]:
    """The children at each draft position of R blocks' base logits [R, D, V] (or [R, D, N] with
    `token_map`, the target id of each logit column; None = columns are target ids): the top-k of each
    position's marginal, per block and position, read to the host once for all blocks."""
    values, ids = topk_logprobs(base_logits, k, token_map)  # [R, D, k]
    return [list(zip(i, v, strict=True)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)]


class DDTreeExpander:
    """Path-independent children: the given children of each draft position (`ddtree_children`)."""

    def __init__(self, lists: list[Children]) -> None:
        self.lists = lists

    def root(self) -> Children:
        return self.lists[0]

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        return self.lists[depth]


def build_ddtree(
    base_logits: torch.Tensor,
    budget: int,
    max_depth: int | None = None,
    token_map: torch.Tensor | None = None,
    children: list[Children] | None = None,
) -> DraftTree:
    """DDTree over base logits [D, V] (or [D, N] with `token_map`): the `budget` most probable prefixes
    under the factorised marginals. `children`: the block's `ddtree_children` (at least `budget` each)
    when a batch already computed them."""
    depth = base_logits.shape[0] if max_depth is None else min(max_depth, base_logits.shape[0])
    lists = children if children is not None else ddtree_children(base_logits[None], budget, token_map)[0]
    return best_first(DDTreeExpander(lists), budget, depth)


@dataclass(frozen=True)
class DominoTreeInputs:
    """One DominoTree round, as the reference builder takes it (`build`).

    head: `first_step`, `step` (on token embeddings) and `correction` (a `DominoHead`); embed: token ids ->
    target embeddings; hidden [D, H], base_logits [D, V]: the backbone's draft positions; root [1]: the last
    committed token; token_map [N]: the target id of each logit column when the drafter has a draft
    vocabulary (the top-M and W2 rows stay in draft ids, the children are target ids).
    """

    head: Any
    embed: Callable[[torch.Tensor], torch.Tensor]
    hidden: torch.Tensor
    base_logits: torch.Tensor
    root: torch.Tensor
    prefix_len: int
    budget: int = 16
    top_m: int = 64
    node_topk: int = 8
    max_depth: int | None = None
    token_map: torch.Tensor | None = None

    def build(self) -> DraftTree:
        """DominoTree with the reference expander (see `ReferenceDominoExpander`)."""
        depth = self.hidden.shape[0] if self.max_depth is None else min(self.max_depth, self.hidden.shape[0])
        return best_first(ReferenceDominoExpander(self), self.budget, depth)


class ReferenceDominoExpander:
    """DominoTree children, computed directly from the head (clarity first; see the module docstring).

    A node's GRU state is one step from its parent's over its own token, taken when the node is expanded.
    """

    def __init__(self, inputs: DominoTreeInputs) -> None:
        self.head, self.embed, self.hidden, self.base = inputs.head, inputs.embed, inputs.hidden, inputs.base_logits
        self.prefix_len, self.node_topk, self.token_map = inputs.prefix_len, inputs.node_topk, inputs.token_map
        top_m, dtype = inputs.top_m, self.hidden.dtype
        self.candidates = [self.base[d].topk(top_m).indices if top_m else None for d in range(len(self.base))]
        self.state: dict[int, torch.Tensor] = {-1: self.head.first_step(self.embed(inputs.root).to(dtype))}  # [1, G]
        self.children_ids: dict[int, torch.Tensor] = {}  # node -> its children's ids, best first

    def _children(self, node: int, position: int) -> Children:
        """Children at draft position `position` (1-based) of `node`, from its GRU state."""
        d = position - 1
        tmap = self.token_map
        if position <= self.prefix_len:
            values, ids = topk_logprobs(self.base[d], self.node_topk, tmap)
        else:
            cand = self.candidates[d]
            logits = self.base[d] if cand is None else self.base[d, cand]
            logits = logits + self.head.correction(self.hidden[d : d + 1], self.state[node], cand)[0]
            names = tmap if cand is None else (cand if tmap is None else tmap[cand])
            values, ids = topk_logprobs(logits, self.node_topk, names)
        self.children_ids[node] = ids
        return ids.tolist(), values.tolist()

    def root(self) -> Children:
        return self._children(-1, 1)

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        token = self.children_ids[parent][rank : rank + 1]
        self.state[node] = self.head.step(self.embed(token).to(self.hidden.dtype), self.state[parent])
        return self._children(node, depth + 1)

    def expand_many(self, requests: list[tuple[int, int, int, int]]) -> list[Children]:
        return [self.expand(*request) for request in requests]


def build_dominotree_reference(*args: Any, **kwargs: Any) -> DraftTree:
    """`DominoTreeInputs(*args, **kwargs).build()`: the reference DominoTree from its fields, in their order."""
    return DominoTreeInputs(*args, **kwargs).build()
