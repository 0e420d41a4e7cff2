"""The draft vocabulary (FR-Spec; EAGLE-3's `draft_vocab_size`): the N target ids a drafter's logits cover.

A drafter with `config.draft_vocab_size = N` predicts over N target ids only, the rows of the target's
lm_head for those ids. The subset travels with the weights as EAGLE-3 stores it, in two buffers of the
drafter (checkpoint keys `d2t` and `t2d`): `d2t` [N] int64 offsets (`target id = draft id + d2t[draft id]`)
and `t2d` [V] bool (whether a target id is in the subset). Everything outside the logits stays in target
ids (block tokens, GRU inputs, what decoding emits), so the users of a subset need the mapping both ways,
and verification embeds a draft distribution in the full vocabulary (zeros outside), which is what keeps
every verification rule exact. Training picks the subset as the N most frequent labels (`DraftVocab.choose`).

`DraftVocab` is the drafter's view of its subset: it reads the buffers from the drafter each time (a load
may replace them) and caches what it derives from them. Without a subset every map is the identity and
`draft_to_target()` is None.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

# The buffers' checkpoint names and dtypes: they keep their own dtypes whatever the weights are cast to.
BUFFER_DTYPES = {"d2t": torch.int64, "t2d": torch.bool}


def register_buffers(module: nn.Module, size: int, vocab_size: int) -> None:
    """Give `module` the `d2t` / `t2d` buffers of an N-id subset, holding a valid placeholder (the last N
    ids) until `DraftVocab.set_ids` or a checkpoint fills them."""
    module.register_buffer("d2t", torch.full((size,), vocab_size - size, dtype=torch.long))
    module.register_buffer("t2d", torch.zeros(vocab_size, dtype=torch.bool))
    module.t2d[vocab_size - size :] = True


def top_ids(label_counts: torch.Tensor, size: int) -> torch.Tensor:
    """The `size` most frequent target ids of `label_counts` [V] (ties: the lower id first)."""
    return label_counts.argsort(descending=True, stable=True)[:size]


def coverage(label_counts: torch.Tensor, ids: torch.Tensor) -> float:
    """The share of the counted labels that fall inside the subset `ids` (5 decimals)."""
    return round(float(label_counts[ids].sum() / label_counts.sum().clamp(min=1)), 5)


class DraftVocab:
    """The draft vocabulary of one drafter (`size=None`: the full vocabulary, every map the identity)."""

    def __init__(self, owner: nn.Module, size: int | None, vocab_size: int) -> None:
        self._owner, self.size, self.vocab_size = owner, size, vocab_size
        self._maps: tuple[tuple, torch.Tensor, torch.Tensor] | None = None  # key, draft -> target, inverse
        self._rows: tuple[tuple, torch.Tensor, torch.Tensor | None] | None = None  # key, lm_head rows, bias
        if size is not None:
            register_buffers(owner, size, vocab_size)

    @property
    def is_subset(self) -> bool:
        """Whether the logits cover a subset (False: the full vocabulary, the public layout)."""
        return self.size is not None

    @property
    def d2t(self) -> torch.Tensor:
        return self._owner.d2t

    @property
    def t2d(self) -> torch.Tensor:
        return self._owner.t2d

    @torch.no_grad()
    def set_ids(self, target_ids: torch.Tensor) -> None:
        """Use the N target ids `target_ids` (any order, distinct) as the subset (sorted ascending)."""
        if not self.is_subset:
            raise ValueError("this drafter predicts over the full vocabulary (draft_vocab_size is null)")
        ids = torch.as_tensor(target_ids, dtype=torch.long).flatten().unique()  # sorted
        n, v = self.size, self.vocab_size
        if ids.numel() != n or len(target_ids) != n:
            raise ValueError(f"the draft vocabulary needs {n} distinct ids, got {ids.numel()} of {len(target_ids)}")
        if ids[0] < 0 or ids[-1] >= v:
            raise ValueError(f"draft vocabulary ids must lie in [0, {v})")
        self.d2t.copy_(ids - torch.arange(n))
        self.t2d.zero_()
        self.t2d[ids] = True

    def problems(self) -> list[str]:
        """Why `d2t` / `t2d` are not one consistent subset of the target vocabulary (empty when they are)."""
        if not self.is_subset:
            return []
        n, v = self.size, self.vocab_size
        ids = torch.arange(n, device=self.d2t.device) + self.d2t.long()
        problems = []
        if ids.min() < 0 or ids.max() >= v:
            problems.append(f"d2t maps draft ids outside the target vocabulary [0, {v})")
        elif ids.unique().numel() != n:
            problems.append("d2t maps two draft ids to the same target id")
        elif int(self.t2d.sum()) != n or not bool(self.t2d[ids].all()):
            problems.append("t2d does not mark exactly the target ids that d2t maps to")
        return problems

    def _key(self) -> tuple:
        """Identifies the current `d2t` (replaced by a load, or written by `set_ids`)."""
        return (self.d2t.data_ptr(), self.d2t.device, self.d2t._version)

    def _derived(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(target id of every draft id [N], draft id of every target id [V] (0 outside)), derived from
        `d2t` once per subset and reused by every round and training step."""
        key = self._key()
        if self._maps is None or self._maps[0] != key:
            n, device = self.size, self.d2t.device
            target_ids = torch.arange(n, device=device) + self.d2t
            inverse = torch.zeros(self.vocab_size, dtype=torch.long, device=device)
            inverse[target_ids] = torch.arange(n, device=device)
            self._maps = (key, target_ids, inverse)
        return self._maps[1], self._maps[2]

    def draft_to_target(self) -> torch.Tensor | None:
        """The target id of every draft id [N] (int64; shared, do not modify); None without a subset."""
        return self._derived()[0] if self.is_subset else None

    def target_to_draft(self) -> torch.Tensor | None:
        """The draft id of every target id [V] (int64, 0 outside the subset; shared, do not modify); None
        without a subset."""
        return self._derived()[1] if self.is_subset else None

    def to_target_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Ids picked from the drafter's logits -> target ids (the identity without a subset)."""
        return ids + self.d2t[ids] if self.is_subset else ids

    def to_draft_ids(self, target_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Target ids -> (draft ids, whether each is in the subset); ids outside it map to 0."""
        if not self.is_subset:
            return target_ids, torch.ones_like(target_ids, dtype=torch.bool)
        inside = self.t2d[target_ids]
        return torch.where(inside, self.target_to_draft()[target_ids], 0), inside

    def full_vocab_probs(self, probs: torch.Tensor) -> torch.Tensor:
        """A distribution over draft ids [..., N] as one over the target vocabulary [..., V] (0 outside)."""
        if not self.is_subset:
            return probs
        out = probs.new_zeros(*probs.shape[:-1], self.vocab_size)
        return out.index_copy_(-1, self.draft_to_target(), probs)

    def logits(self, flat: torch.Tensor, lm_head: nn.Module) -> torch.Tensor:
        """The target's lm_head on [n, H] -> [n, N or V]: with a subset only its N rows (N x H work, not V x H),
        gathered once per (weights, subset, device)."""
        if not self.is_subset:
            return lm_head(flat)
        weight, bias = lm_head.weight, getattr(lm_head, "bias", None)
        key = (weight.data_ptr(), weight.device, weight.dtype, self._key())
        if self._rows is None or self._rows[0] != key:
            ids = self.draft_to_target().to(weight.device)
            rows, row_bias = weight.detach()[ids], None if bias is None else bias.detach()[ids]
            policy = getattr(lm_head, "policy", None)
            if policy is not None:  # an lm_head on measured kernels: its rows follow the same policy
                self._rows = (key, policy.linear(rows, row_bias))
            else:
                self._rows = (key, functools.partial(torch.nn.functional.linear, weight=rows, bias=row_bias))
        return self._rows[1](flat)

    def choose(self, train_counts: torch.Tensor, val_counts: torch.Tensor | None = None) -> dict[str, Any]:
        """Make the N most frequent labels of `train_counts` [V] the subset; returns what the data manifest
        records of it (size, label counts, coverage of the training and, given `val_counts`, validation labels)."""
        ids = top_ids(train_counts, self.size)
        self.set_ids(ids)
        out: dict[str, Any] = {
            "size": self.size,
            "train_labels": int(train_counts.sum()),
            "distinct_train_labels": int((train_counts > 0).sum()),
            "coverage_train": coverage(train_counts, ids),
        }
        if val_counts is not None:
            out["coverage_val"] = coverage(val_counts, ids)
        return out
