"""`DraftTree`: the nodes one tree round proposes, and what verification needs from them.

Nodes are stored in the order the best-first builder added them (a parent always before its children).
The verification window is `[root, node 0, node 1, ...]`: window index 0 is the root (the last committed
token), node i sits at window index i + 1, at position `start + depth` with depth(root) = 0, and sees the
cached prefix, the root and its own ancestors only: `visibility` says which window entries see which, and
`tree_attention_mask` turns that into the additive 4-D mask of the target's tree forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class DraftTree:
    tokens: list[int] = field(default_factory=list)  # token of node i
    parents: list[int] = field(default_factory=list)  # parent node index; -1 = the root
    depths: list[int] = field(default_factory=list)  # 1 for the root's children
    scores: list[float] = field(default_factory=list)  # log-probability of the root-to-node path

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int, depth: int, score: float) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(depth)
        self.scores.append(score)
        return len(self.tokens) - 1

    def prefix(self, n: int) -> DraftTree:
        """The first n nodes: a tree again, since a parent is always added before its children."""
        return DraftTree(self.tokens[:n], self.parents[:n], self.depths[:n], self.scores[:n])

    def children(self) -> list[dict[int, int]]:
        """Per window index (root first): child token -> the child's window index."""
        out: list[dict[int, int]] = [{} for _ in range(len(self) + 1)]
        for i, (token, parent) in enumerate(zip(self.tokens, self.parents, strict=True)):
            out[parent + 1][token] = i + 1
        return out

    def visibility(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """[n + 1, n + 1] bool over the window: row i may attend to column j (ancestors and itself)."""
        n = len(self) + 1
        visible = torch.zeros(n, n, dtype=torch.bool)
        visible[:, 0] = True
        visible[0, 0] = True
        for i, parent in enumerate(self.parents):
            row = i + 1
            visible[row] = visible[parent + 1]
            visible[row, row] = True
        return visible.to(device)

    def window_depths(self) -> list[int]:
        """Depth of every window entry, root (0) first: positions are `start + depth`."""
        return [0, *self.depths]

    def path(self, node: int) -> list[int]:
        """Node indices from the root's child down to `node`."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]


def tree_attention_mask(
    prefix_len: int, visible: torch.Tensor, dtype: torch.dtype, device: torch.device | str | None = None
) -> torch.Tensor:
    """Additive mask [1, 1, n, prefix_len + n] for n tree nodes after a cached prefix.

    `visible` [n, n] bool: node i may attend to node j (its ancestors and itself). Every node sees the
    whole prefix.
    """
    n = visible.shape[0]
    device = device if device is not None else visible.device
    allowed = torch.cat([torch.ones(n, prefix_len, dtype=torch.bool, device=device), visible.to(device)], dim=1)
    mask = torch.zeros(n, prefix_len + n, dtype=dtype, device=device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask.view(1, 1, n, prefix_len + n)
