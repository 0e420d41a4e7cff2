"""Tree decoding: `ddtree` (marginal best-first tree) and `dominotree` (path-conditional best-first tree).

One round: the backbone drafts the block once; a best-first tree of `budget` nodes is built from its
draft positions (`build.py`, `expander.py`); the target verifies `[root, nodes]` in one forward with
position ids `start + depth` and a 4-D mask in which every node sees the cached prefix and its ancestors;
the walk from the root follows the target's choice at each node; the accepted path and the target's
bonus token are committed, and `SpeculativeDecoder.commit` gathers the path's KV entries and features to
the front (`Verdict.keep`).

Acceptance rules: `verify.py` (`match`, `residual`). Each round's accepted path is counted in the stats'
main / sibling steps (`verify.walk_steps`; the accepted-after-sibling rate, `inference/decoding/stats.py`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from inference.decoding.budget import AUTO, best_prefix, prefix_settled
from inference.decoding.cost_model import RunningMean
from inference.decoding.methods import check_drafter, check_options, method_spec
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.speculative import Candidates, DecodeState, SpeculativeDecoder, Verdict, VerifyWindow
from inference.decoding.tree.build import RowsJudge, best_first_batched, best_first_rows, build_ddtree, ddtree_children
from inference.decoding.tree.draft_tree import DraftTree
from inference.decoding.tree.expander import FastDominoExpander
from inference.decoding.tree.rows_expander import DominoRowsExpander
from inference.decoding.tree.verify import TREE_WALKS, walk_steps
from inference.drafter import DominoDrafter
from inference.kernels.cuda_graph import use_cuda_graphs
from inference.targets.adapter import TargetModel


class TreeDecoder(SpeculativeDecoder):
    """`ddtree` (marginal tree from the base logits) or `dominotree` (path-conditional, with the head)."""

    def __init__(
        self,
        target: TargetModel,
        drafter: DominoDrafter,
        method: str,
        options: DecodeOptions | None = None,
        tree: TreeOptions | None = None,
    ) -> None:
        options, tree = options or DecodeOptions(), tree or TreeOptions()
        spec = method_spec(method, family="tree")
        check_options(method, options)
        check_drafter(method, drafter)
        super().__init__(target, drafter, options)
        self.name, self.walk = method, TREE_WALKS[options.verify]
        self.cost_aware = tree.budget == AUTO
        self.node_budget = tree.max_budget if self.cost_aware else tree.budget  # the tree a round builds
        self.expander = self.rows_expander = None
        if spec.needs_head:
            graphs = use_cuda_graphs(options.cuda_graph, target.device)
            self.expander = FastDominoExpander(
                drafter, tree.top_m, tree.node_topk, self.node_budget, graphs, width=tree.expand_width
            )
            self.rows_expander = DominoRowsExpander(self.expander)  # a batched round's rows, expanded together
        self.fixed_s, self.step_s = RunningMean(), RunningMean()  # a round's fixed draft cost; one head step

    def max_window(self) -> int:
        return self.node_budget + 1

    def _round_cost(
        self, depths: list[int], max_depth: int, fixed: float, step: float, context: int
    ) -> Callable[[int], float]:
        """Seconds of a round that keeps the first n of nodes at `depths`: drafting (the `fixed` part, plus
        DominoTree's head steps of `step` seconds for the nodes it must expand) and the verify over n + 1
        after `context` cached tokens."""
        width = self.expander.width if self.expander is not None else 1
        expanded = list(itertools.accumulate(int(d < max_depth) for d in depths))

        def cost(n: int) -> float:
            steps = -(-expanded[n - 1] // width) if n and step else 0
            return fixed + step * steps + self.verify_cost(n + 1, context)

        return cost

    def _stop_rule(
        self, max_depth: int, fixed: float, step: float, context: int
    ) -> Callable[[list[float], list[int], float], bool]:
        """`budget.prefix_settled` for DominoTree's builder: the first k of the nodes built so far cost what
        `_round_cost` says, and any longer prefix at least their head steps, its fixed part and its verify."""
        limit, predict = self.node_budget, self.acceptance.predict

        def enough(scores: list[float], depths: list[int], bound: float) -> bool:
            cost = self._round_cost(depths, max_depth, fixed, step, context)
            drafting = cost(len(depths)) - self.verify_cost(len(depths) + 1, context)  # longer ones draft at least this

            def at_least(m: int) -> float:
                return drafting + self.verify_cost(m + 1, context)

            return prefix_settled(predict(scores), predict([bound])[0], limit, cost, at_least)

        return enough

    def draft(self, state: DecodeState) -> DraftTree:
        built = self.candidates(state, settle=self.cost_aware and state.forced_size is None)
        if built is None:
            return self.no_draft(state)
        if state.forced_size is not None:
            keep = min(state.forced_size, len(built.draft))
        elif self.cost_aware:
            keep = best_prefix(built.gains, built.cost)
        else:
            keep = len(built.draft)
        return self.keep(state, built, keep)

    def draft_blocks(
        self, states: list[DecodeState], enough: RowsJudge | None = None, limit: int | None = None
    ) -> None:
        """A batched round's drafts: the rows' backbone in one forward, their base logits in one lm_head
        product and, for DDTree, every row's children in one top-k (`ddtree_children`); DominoTree builds
        every row's tree, the rows' head steps taken together (`best_first_rows`; with `enough`, a
        cost-aware batch's, it stops once the batch's choice is built). Every tree holds at most `limit`
        nodes (None: the decoder's budget), the best-first prefix of its whole tree. Left in
        `state.drafted` for the row's `candidates`."""
        super().draft_blocks(states)
        rows = [s for s in states if s.block is not None]
        if not rows:
            return
        hidden = torch.cat([self.drafter.draft_hidden_slice(s.block) for s in rows])
        base = self.drafter.lm_head(hidden)  # [R, D, V or N]
        children, trees = [None] * len(rows), [None] * len(rows)
        budget = self.node_budget if limit is None else max(min(limit, self.node_budget), 1)
        if self.expander is None:
            children = ddtree_children(base, budget, self.drafter.vocab.draft_to_target())
        else:
            depths = [min(hidden.shape[1], s.tokens_left - 1) for s in rows]
            expander = self.rows_expander.prepare(hidden, base, torch.cat([s.root for s in rows]))
            trees = best_first_rows(expander, budget, depths, self.expander.width, enough)
        for state, h, b, kids, tree in zip(rows, hidden, base, children, trees, strict=True):
            state.block, state.drafted = None, (h, b, kids, tree, budget)

    def candidates(self, state: DecodeState, settle: bool = False) -> Candidates | None:
        """This round's tree, best first, before its size is chosen (None: no draft can be emitted).
        `settle`: DominoTree stops expanding once the prefix a batch-1 cost-aware round keeps is known."""
        depth = min(self.drafter.config.num_draft_tokens, state.tokens_left - 1)  # deeper could never be emitted
        if depth <= 0:
            return None
        t0 = self.clock.now()
        alone = state.block is None and state.drafted is None  # (a batch's shared drafting is not a batch-1 cost)
        budget = self.node_budget
        if state.drafted is not None:
            (hidden, base, children, tree, budget), state.drafted = state.drafted, None
        else:
            hidden = self.drafter.draft_hidden_slice(self.block_hidden(state))[0]
            base, children, tree = self.drafter.lm_head(hidden), None, None
        t1 = self.clock.now()
        if tree is not None:  # built with the batch's rows
            fixed, step = self.fixed_s.value(), self.step_s.value()
        elif self.expander is None:
            tree = build_ddtree(base, budget, depth, self.drafter.vocab.draft_to_target(), children)
            if alone:
                self.fixed_s.add(self.clock.now() - t0)
            fixed, step = self.fixed_s.value(), 0.0
        else:
            expander = self.expander.prepare(hidden, base, state.root)
            t2, steps = self.clock.now(), self.expander.steps
            if alone:
                self.fixed_s.add(t2 - t0)
            fixed, step = self.fixed_s.value(), self.step_s.value()  # this round's cost model, set before the build
            enough = self._stop_rule(depth, fixed, step, state.length) if settle else None
            tree = best_first_batched(expander, self.node_budget, depth, self.expander.width, enough)
            if self.expander.steps > steps:
                self.step_s.add(self.clock.now() - t2, self.expander.steps - steps)
        parts = state.stats.draft_parts_s
        parts["backbone"] = parts.get("backbone", 0.0) + t1 - t0
        parts["build"] = parts.get("build", 0.0) + self.clock.now() - t1
        cost = self._round_cost(tree.depths, depth, fixed, step, state.length) if self.cost_aware else None
        return Candidates(tree, self.acceptance.predict(tree.scores), cost)

    def no_draft(self, state: DecodeState) -> DraftTree:
        """The empty tree: the round verifies the root alone (recorded as a round of size 0)."""
        state.stats.draft_sizes.append(0)
        state.stats.predicted.append(1.0)
        return DraftTree()

    def verify_window(self, state: DecodeState, tree: DraftTree) -> VerifyWindow:
        device = state.root.device
        ids = torch.cat([state.root, torch.tensor(tree.tokens, dtype=torch.long, device=device)]).unsqueeze(0)
        return VerifyWindow(ids, torch.tensor(tree.window_depths(), device=device), tree.visibility(device))

    def judge(self, state: DecodeState, tree: DraftTree, logits: torch.Tensor, features: torch.Tensor) -> Verdict:
        path, bonus = self.walk(tree, logits, self.sampling, state.generator)
        accepted = set(path)
        for sibling, took in walk_steps(tree, path):
            state.stats.count_step(sibling, took)
        self.acceptance.update(tree.scores, [i + 1 in accepted for i in range(len(tree))])
        tokens = [tree.tokens[i - 1] for i in path] + [bonus]
        keep = torch.tensor([0, *path], dtype=torch.long, device=state.root.device)
        return Verdict(tokens=tokens, features=features, keep=keep, logits=logits)
