"""`DominoRowsExpander`: DominoTree node expansion for every row of a batched round at once.

At concurrency above 1 each row builds its own best-first tree, and on a CPU a head step costs fixed
overhead whatever its number of nodes (`expander.py`): rows that expanded one after another paid that
overhead once per row and step. Here the rows' trees grow together (`build.best_first_rows`): each step
takes every row's next `width` frontier nodes, runs one GRU step and one correction for all of them and
reads their children to the host once. The arithmetic is `FastDominoExpander`'s, with a leading row
dimension: the setup (top-M candidates, their base logits and W2 rows, the prefix's base children, the
roots' states and children) runs once for all rows, and a node's correction reads only its own row's
candidates (one product per row, over that row's nodes of the step, as the row's own step computes it).
Eager only: the number of nodes per step varies with the rows, so there is no graph to capture (on a
GPU a batch-1 round replays `FastDominoExpander`'s graphs).
"""

from __future__ import annotations

from itertools import groupby

import torch

from inference.decoding.tree.build import Children, topk_logprobs
from inference.decoding.tree.expander import FastDominoExpander, candidate_logits, top_m_candidates


class DominoRowsExpander:
    """The rows of one batched round (`prepare`), expanded together (`expand_rows`); `row(r)` is row r's
    own expander for `best_first`'s replay."""

    def __init__(self, fast: FastDominoExpander) -> None:
        self.fast, self.head, self.drafter = fast, fast.head, fast.drafter
        self.steps = 0  # expansion steps run so far

    @torch.inference_mode()
    def prepare(self, hidden: torch.Tensor, base: torch.Tensor, roots: torch.Tensor) -> DominoRowsExpander:
        """Load the rows' backbone outputs (hidden [R, D, H], base logits [R, D, V], roots [R]) and set up."""
        fast, head = self.fast, self.head
        rows = hidden.shape[0]
        self.hidden, self.base = hidden, base
        if fast.top_m:
            self.cand, self.base_m, w2 = top_m_candidates(base, fast.top_m, fast.token_map, head.embed_proj[2].weight)
            self.w2_t = w2.transpose(1, 2).contiguous()  # [R, r, D * M]
        self._base_lists = []
        for r in range(rows):  # one row at a time: the reference's exact ops
            chosen = [topk_logprobs(base[r, pos], fast.k_base, fast.token_map) for pos in range(fast.prefix)]
            self._base_lists.append([(ids.tolist(), values.tolist()) for values, ids in chosen])
        embed = self.drafter.embed(roots).to(hidden.dtype)
        self.pool = head.decoding_first_step(head.decoding_gates(embed))  # [R, G]: row r's root at slot r
        everyone = torch.arange(rows, device=hidden.device)
        first = torch.zeros(rows, dtype=torch.long, device=hidden.device)
        self._roots = self._corrected(hidden[:, 0], self.pool, everyone, first).tolist()
        self._slot = {(r, -1): r for r in range(rows)}
        self._ids: dict[tuple[int, int], list[int]] = {}
        return self

    def row(self, r: int) -> _Row:
        return _Row(self, r)

    def root(self, r: int) -> Children:
        return self._children(r, -1, 1, self._roots[r])

    @torch.inference_mode()
    def expand_rows(self, requests: list[tuple[int, tuple[int, int, int, int]]]) -> list[Children]:
        """Children of each (row, (node, parent, rank, depth)), every node in one step."""
        fast, head = self.fast, self.head
        device = self.pool.device
        slots = torch.tensor([self._slot[(r, parent)] for r, (_, parent, _, _) in requests], device=device)
        tokens = torch.tensor([self._ids[(r, parent)][rank] for r, (_, parent, rank, _) in requests], device=device)
        pos = torch.tensor([depth for _, (*_, depth) in requests], device=device)
        rows = torch.tensor([r for r, _ in requests], device=device)
        if fast.gate_table is not None:
            gi = fast.gate_table.index_select(0, fast.draft_index.index_select(0, tokens))
        else:
            gi = head.decoding_gates(self.drafter.embed(tokens).to(self.pool.dtype))
        states = head.decoding_step(gi, self.pool.index_select(0, slots))
        choices = self._corrected(self.hidden[rows, pos], states, rows, pos).tolist()  # the step's one read
        self.steps += 1
        first = self.pool.shape[0]
        self.pool = torch.cat([self.pool, states])
        out = []
        for j, (r, (node, _, _, depth)) in enumerate(requests):
            self._slot[(r, node)] = first + j
            out.append(self._children(r, node, depth + 1, choices[j]))
        return out

    def _children(self, r: int, node: int, position: int, corrected: list[list[float]]) -> Children:
        """Row r's node's children at draft position `position` (1-based): base ones within the prefix."""
        fast = self.fast
        ids, values = self._base_lists[r][position - 1] if position <= fast.prefix else corrected[::-1]
        ids = [int(i) for i in ids]
        self._ids[(r, node)] = ids
        return ids, values

    def _corrected(
        self, hidden: torch.Tensor, states: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor
    ) -> torch.Tensor:
        """Corrected children (log-probs and ids, float64 [n, 2, k]) of n nodes of rows `rows` with GRU
        `states` [n, G] whose children sit at draft positions `pos` + 1; the nodes come grouped by row."""
        fast, head = self.fast, self.head
        if fast.top_m:
            features = head.correction_features(hidden, states).float()
            parts, start = [], 0
            for r, group in groupby(rows.tolist()):
                end = start + len(list(group))
                parts.append(candidate_logits(features[start:end], self.w2_t[r], self.base_m[r], pos[start:end]))
                start = end
            values, idx = torch.log_softmax(torch.cat(parts), dim=-1).topk(fast.k, dim=-1)
            ids = self.cand[rows, pos].gather(1, idx)
        else:
            logits = self.base[rows, pos] + head.correction(hidden, states)
            values, ids = topk_logprobs(logits, fast.k, fast.token_map)
        return torch.stack([values.double(), ids.double()], dim=1)


class _Row:
    """One row of a `DominoRowsExpander` as an `Expander` (its root; one node at a time)."""

    def __init__(self, rows: DominoRowsExpander, r: int) -> None:
        self.rows, self.r = rows, r

    def root(self) -> Children:
        return self.rows.root(self.r)

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        return self.rows.expand_rows([(self.r, (node, parent, rank, depth))])[0]
