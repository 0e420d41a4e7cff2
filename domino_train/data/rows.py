"""The training rows a data module serves, and how they become a batch.

Batches are dicts: `input_ids`, `loss_mask`, `attention_mask` [b, T] (right-padded), `features`
[b, T, K*H] when a feature cache is used (offline training; otherwise the module runs the target), and
`next_ids` [b, T] (the target's greedy next tokens, from the cache) when training on distilled labels
(`labels: target`), `topk_ids` / `topk_logprobs` [b, T, k] (the target's most likely next tokens)
when the cache holds them, and `source` [b] (an index into `Rows.sources`: the part of the row's id
before its first "/", which `domino-data` sets to the source's name) for rows that report their source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import Dataset


def collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Right-pad a list of rows into a batch (pad id 0, loss mask 0, attention mask 0)."""
    longest = max(len(r["input_ids"]) for r in rows)
    b = len(rows)
    batch = {
        "input_ids": torch.zeros(b, longest, dtype=torch.long),
        "loss_mask": torch.zeros(b, longest, dtype=torch.long),
        "attention_mask": torch.zeros(b, longest, dtype=torch.long),
    }
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        batch["input_ids"][i, :n] = torch.as_tensor(r["input_ids"])
        batch["loss_mask"][i, :n] = torch.as_tensor(r["loss_mask"])
        batch["attention_mask"][i, :n] = 1
    if "features" in rows[0]:
        feats = torch.zeros(b, longest, rows[0]["features"].shape[-1], dtype=rows[0]["features"].dtype)
        for i, r in enumerate(rows):
            feats[i, : len(r["features"])] = r["features"]
        batch["features"] = feats
    if "next_ids" in rows[0]:
        batch["next_ids"] = torch.zeros(b, longest, dtype=torch.long)
        for i, r in enumerate(rows):
            batch["next_ids"][i, : len(r["next_ids"])] = torch.as_tensor(r["next_ids"])
    if "source" in rows[0]:
        batch["source"] = torch.tensor([r["source"] for r in rows])
    for name, fill in (("topk_ids", 0), ("topk_logprobs", float("-inf"))):  # padding: an empty distribution
        if name in rows[0]:
            k = rows[0][name].shape[-1]
            batch[name] = torch.full((b, longest, k), fill, dtype=rows[0][name].dtype)
            for i, r in enumerate(rows):
                batch[name][i, : len(r[name])] = r[name]
    return batch


class Rows(Dataset):
    """Rows of one or more sets (lists or Arrow sets), truncated to `max_length`, with cached features
    (and the target's next ids, for distilled labels) when given.

    `sets`: (rows, features or None) per set; `indices`: (set, row) pairs. With `sources`, each row also
    carries the index of its source in `self.sources` (validation reports tau per source).
    """

    def __init__(
        self,
        sets: list[tuple[Any, Any]],
        indices: list[tuple[int, int]],
        max_length: int,
        next_ids: bool = False,
        sources: bool = False,
    ) -> None:
        self.sets, self.indices, self.max_length, self.with_next_ids = sets, indices, max_length, next_ids
        self.sources: list[str] = []
        self._source_of: list[int] | None = None
        if sources:
            names = [self._source_name(k, j) for k, j in indices]
            self.sources = sorted(set(names))
            self._source_of = [self.sources.index(n) for n in names]

    def _source_name(self, k: int, j: int) -> str:
        rows = self.sets[k][0]
        row_id = rows[j].get("id") if isinstance(rows[j], dict) else None
        return str(row_id).split("/")[0] if row_id is not None and "/" in str(row_id) else ""

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> dict[str, Any]:
        k, j = self.indices[i]
        rows, features = self.sets[k]
        row = rows[j]
        out = {"input_ids": row["input_ids"][: self.max_length], "loss_mask": row["loss_mask"][: self.max_length]}
        if self._source_of is not None:
            out["source"] = self._source_of[i]
        if features is not None:
            out["features"] = features[j][: self.max_length]
            if self.with_next_ids:
                out["next_ids"] = features.next_ids(j)[: self.max_length]
            if features.topk:
                ids, logprobs = features.distribution(j)
                out["topk_ids"], out["topk_logprobs"] = ids[: self.max_length], logprobs[: self.max_length]
        return out

    def label_counts(
        self, vocab_size: int, predict: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor:
        """How often each target id is a label (a loss-masked position's text token, or the target's
        choice there with `next_ids`) in these rows [V] (int64): what the draft vocabulary is chosen from.

        `predict` (ids [T] -> the target's next ids [T]) gives distilled labels for rows without a cache
        (online features): one target forward per row."""
        counts = torch.zeros(vocab_size, dtype=torch.long)
        by_set: dict[int, list[int]] = {}
        for k, j in self.indices:
            by_set.setdefault(k, []).append(j)
        for k, rows_of_set in by_set.items():
            rows, features = self.sets[k]
            picked = rows.select(rows_of_set) if hasattr(rows, "select") else [rows[j] for j in rows_of_set]
            columns = (
                (picked["input_ids"], picked["loss_mask"])
                if hasattr(picked, "column_names")
                else ([r["input_ids"] for r in picked], [r["loss_mask"] for r in picked])
            )
            for j, ids, mask in zip(rows_of_set, *columns, strict=True):
                ids = torch.as_tensor(ids[: self.max_length], dtype=torch.long)
                mask = torch.as_tensor(mask[: self.max_length]) > 0
                if self.with_next_ids:
                    labels = features.next_ids(j)[: self.max_length].long()[:-1][mask[1:]]
                elif predict is not None:
                    labels = predict(ids).long()[:-1][mask[1:]]
                else:
                    labels = ids[mask]
                counts += torch.bincount(labels, minlength=vocab_size)
        return counts
