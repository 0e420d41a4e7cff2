"""Tree verification rules: which path of a draft tree the target accepts, and its bonus token.

The target has scored the window `[root, node 0, node 1, ...]` in one forward (row i = its next-token
distribution after window entry i); a rule walks the tree from the root and returns the window indices
of the accepted nodes and the bonus token. Every distribution comes from `inference.decoding.sampling`.
The chain rules are in `inference.decoding.chain.verify`.

Acceptance rules (both lossless at any temperature):
- `match` (sample-and-walk): at each visited node draw y from the target; go to the child whose token is
  y, or stop and commit y as the bonus.
- `residual` (multi-candidate rule for deterministic candidate sets): try the node's children in tree
  order, accepting child c with probability p_res(c) and otherwise removing c from p_res (renormalised);
  when none is accepted the bonus is drawn from the residual. Same distribution as `match`.
"""

from __future__ import annotations

import torch

from inference.decoding.sampling import SamplingParams, bernoulli, probabilities, sample, sample_from
from inference.decoding.tree.draft_tree import DraftTree


def walk_match(tree: DraftTree, logits: torch.Tensor, params: SamplingParams, generator) -> tuple[list[int], int]:
    """Sample-and-walk: (window indices of the accepted nodes, the bonus token)."""
    choice = sample(logits, params, generator).tolist()  # one draw per window entry, one host read
    children = tree.children()
    path, cur = [], 0
    while (nxt := children[cur].get(choice[cur])) is not None:
        path.append(nxt)
        cur = nxt
    return path, choice[cur]


def walk_residual(tree: DraftTree, logits: torch.Tensor, params: SamplingParams, generator) -> tuple[list[int], int]:
    """The multi-candidate residual rule (see the module docstring)."""
    children = tree.children()
    path, cur = [], 0
    while True:
        p = probabilities(logits[cur], params).double()
        for token, window_index in children[cur].items():
            if bernoulli(p[token] / p.sum(), generator):
                path.append(window_index)
                cur = window_index
                break
            p[token] = 0.0
        else:
            return path, int(sample_from(p / p.sum(), generator))


def walk_steps(tree: DraftTree, path: list[int]) -> list[tuple[bool, bool]]:
    """(sibling, accepted) of each step of an accepted path: the per-round unit of the accepted-after-sibling
    rate (`inference.decoding.stats`).

    Walking `path` (window indices of the accepted nodes, root excluded), every accepted node that has
    children in `tree` is one step, where the walk tries to go one deeper; a node without children is none,
    since nothing was drafted below it. `sibling` is True when the node is not its parent's first child: the
    builder (`build.best_first`) adds a parent's children in score-rank order, so the first one added is the
    best-scored. `accepted` is True when the walk accepted one of the node's children (the path goes on).
    """
    first_child: dict[int, int] = {}
    for node, parent in enumerate(tree.parents):
        first_child.setdefault(parent, node)
    steps = []
    for i, window_index in enumerate(path):
        node = window_index - 1
        if node in first_child:  # has children
            steps.append((first_child[tree.parents[node]] != node, i + 1 < len(path)))
    return steps


TREE_WALKS = {"match": walk_match, "residual": walk_residual}  # verify rule -> the walk that applies it
TREE_VERIFY_RULES = tuple(TREE_WALKS)
