"""Decoding bugs planted on purpose, to prove the lossless check catches them (the tests, and
`benchmarks/lossless_resolution.py` on a real target in its own precision): each commits a token the target
would not have, or computes the target's logits wrongly, only at some positions."""

from __future__ import annotations

from collections.abc import Callable

import torch

from inference.decoding.speculative import VerifyWindow


def accepts_within(tolerance: float):
    """A chain rule (`MatchVerifier.__call__`) that keeps a draft token within `tolerance` logits of the
    target's argmax: an acceptance test with a tolerance."""

    def verify(self, draft, target_logits, generator=None):
        drafts, choice = draft.tokens.tolist(), target_logits.argmax(-1).tolist()
        a = 0
        while a < len(drafts) and target_logits[a].max() - target_logits[a, drafts[a]] <= tolerance:
            a += 1
        return drafts[:a] + [choice[a]]

    return verify


def takes_a_close_sibling(tolerance: float):
    """A tree walk (`TREE_WALKS["match"]`) that, at a node where another child is within `tolerance`
    logits of the target's choice, follows that child instead."""

    def walk(tree, logits, params, generator):
        choice = logits.argmax(-1).tolist()
        children = tree.children()
        path, cur = [], 0
        while True:
            row, best = logits[cur], choice[cur]
            close = [i for token, i in children[cur].items() if token != best and row[best] - row[token] <= tolerance]
            nxt = close[0] if close else children[cur].get(best)
            if nxt is None:
                return path, best
            path.append(nxt)
            cur = nxt

    return walk


def sees_a_sibling(visible: torch.Tensor) -> torch.Tensor:
    """A tree's visibility [n, n] with a planted bug: a node that has siblings also sees the first other one."""
    visible = visible.clone()
    parent = [max((j for j in range(i) if visible[i, j]), default=-1) for i in range(len(visible))]
    for i in range(len(visible)):
        siblings = [j for j in range(len(visible)) if j != i and parent[j] == parent[i] >= 0]
        if siblings:
            visible[i, siblings[0]] = True
    return visible


def sibling_seeing_windows(verify_window: Callable) -> Callable:
    """A tree decoder's `verify_window` (wrapping the real one) whose tree masks carry `sees_a_sibling`: a
    batch verifies the windows its rows' decoder returns, so the bug reaches batched rows too."""

    def planted(self, state, draft):  # noqa: ANN001, ANN202
        win = verify_window(self, state, draft)
        return win if win.visible is None else VerifyWindow(win.ids, win.depths, sees_a_sibling(win.visible))

    return planted
