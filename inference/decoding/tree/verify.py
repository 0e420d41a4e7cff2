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


TREE_WALKS = {"match": walk_match, "residual": walk_residual}  # verify rule -> the walk that applies it
TREE_VERIFY_RULES = tuple(TREE_WALKS)
