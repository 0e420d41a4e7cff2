"""Tree decoding: `ddtree` (marginal best-first tree) and `dominotree` (path-conditional best-first tree).

One round: the backbone drafts the block once; a best-first tree of `budget` nodes is built from its
draft positions (`tree_build`, `tree_expander`); the target verifies `[root, nodes]` in one forward with
position ids `start + depth` and a 4-D mask in which every node sees the cached prefix and its ancestors;
the walk from the root follows the target's choice at each node; the accepted path and the target's
bonus token are committed, and `SpeculativeDecoder.commit` gathers the path's KV entries and features to
the front (`Verdict.keep`).

Acceptance rules (both lossless at any temperature):
- `match` (sample-and-walk): at each visited node draw y from the target; go to the child whose token is
  y, or stop and commit y as the bonus.
- `residual` (multi-candidate rule for deterministic candidate sets): try the node's children in tree
  order, accepting child c with probability p_res(c) and otherwise removing c from p_res (renormalised);
  when none is accepted the bonus is drawn from the residual. Same distribution as `match`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from inference.decoding.cuda_graph import use_cuda_graphs
from inference.decoding.sampling import SamplingParams, probabilities, sample, sample_from
from inference.decoding.speculative import DecodeState, SpeculativeDecoder, Verdict
from inference.decoding.tree import DraftTree
from inference.decoding.tree_build import best_first, build_ddtree
from inference.decoding.tree_expander import FastDominoExpander
from inference.drafter import DominoDrafter
from inference.targets.adapter import TargetModel, tree_attention_mask

TREE_METHODS = ("ddtree", "dominotree")
TREE_VERIFY_RULES = ("match", "residual")


def walk_match(tree: DraftTree, logits: torch.Tensor, params: SamplingParams, generator) -> tuple[list[int], int]:  # noqa: ANN001
    """Sample-and-walk: (window indices of the accepted nodes, the bonus token)."""
    choice = sample(logits, params, generator).tolist()  # one draw per window entry, one host read
    children = tree.children()
    path, cur = [], 0
    while (nxt := children[cur].get(choice[cur])) is not None:
        path.append(nxt)
        cur = nxt
    return path, choice[cur]


def walk_residual(tree: DraftTree, logits: torch.Tensor, params: SamplingParams, generator) -> tuple[list[int], int]:  # noqa: ANN001
    """The multi-candidate residual rule (see the module docstring)."""
    children = tree.children()
    path, cur = [], 0
    while True:
        p = probabilities(logits[cur], params).double()
        for token, window_index in children[cur].items():
            if torch.rand(1, generator=generator, device=p.device, dtype=torch.float64) * p.sum() < p[token]:
                path.append(window_index)
                cur = window_index
                break
            p[token] = 0.0
        else:
            return path, int(sample_from(p / p.sum(), generator))


class TreeDecoder(SpeculativeDecoder):
    def __init__(
        self,
        target: TargetModel,
        drafter: DominoDrafter,
        method: str,
        budget: int = 16,
        top_m: int = 64,
        node_topk: int = 8,
        cuda_graph: str = "auto",
        sampling: SamplingParams | None = None,
        verify: str = "match",
        stop_token_ids: Iterable[int] | None = None,
        max_context: int | None = None,
        sync_stages: bool = True,
    ) -> None:
        if method not in TREE_METHODS:
            raise ValueError(f"unknown tree method {method!r}; choose one of {TREE_METHODS}")
        if verify not in TREE_VERIFY_RULES:
            raise ValueError(f"tree methods verify with {TREE_VERIFY_RULES}, not {verify!r}")
        if method == "dominotree" and drafter.head is None:
            raise ValueError("method 'dominotree' needs a drafter with a Domino head; this is a plain DFlash drafter")
        if budget < 1:
            raise ValueError(f"budget must be >= 1 node, got {budget}")
        super().__init__(target, drafter, sampling, stop_token_ids, max_context, sync_stages)
        self.name, self.budget, self.verify_rule = method, budget, verify
        self.expander = None
        if method == "dominotree":
            graphs = use_cuda_graphs(cuda_graph, target.device)
            self.expander = FastDominoExpander(drafter, top_m, node_topk, budget, graphs)

    def draft(self, state: DecodeState) -> DraftTree:
        depth = min(self.drafter.config.num_draft_tokens, state.budget - 1)  # deeper could never be emitted
        if depth <= 0:
            return DraftTree()
        t0 = self.clock.now()
        hidden = self.drafter.draft_hidden_slice(self.drafter.draft_block(state.draft_cache, state.root))[0]
        base = self.drafter.lm_head(hidden)
        t1 = self.clock.now()
        if self.expander is None:
            token_map = self.drafter.draft_to_target() if self.drafter.has_draft_vocab else None
            tree = build_ddtree(base, self.budget, depth, token_map)
        else:
            tree = best_first(self.expander.prepare(hidden, base, state.root), self.budget, depth)
        parts = state.stats.draft_parts_s
        parts["backbone"] = parts.get("backbone", 0.0) + t1 - t0
        parts["build"] = parts.get("build", 0.0) + self.clock.now() - t1
        return tree

    def verify(self, state: DecodeState, tree: DraftTree) -> Verdict:
        device = state.root.device
        window = torch.cat([state.root, torch.tensor(tree.tokens, dtype=torch.long, device=device)]).unsqueeze(0)
        positions = (state.length + torch.tensor(tree.window_depths(), device=device)).unsqueeze(0)
        mask = tree_attention_mask(state.length, tree.visibility(device), self.target.dtype, device)
        out = self.target(
            window, cache=state.target_cache, position_ids=positions, attention_mask=mask, layer_ids=self.layer_ids
        )
        walk = walk_match if self.verify_rule == "match" else walk_residual
        path, bonus = walk(tree, out.logits[0], self.sampling, state.generator)
        tokens = [tree.tokens[i - 1] for i in path] + [bonus]
        keep = torch.tensor([0, *path], dtype=torch.long, device=device)
        return Verdict(tokens=tokens, features=out.features, keep=keep)
