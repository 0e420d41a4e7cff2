"""`TokenizedDataModule`: trains on the tokenized sets `domino-data` writes, with their feature caches
(offline training) or without (the module runs the target: online features)."""

from __future__ import annotations

from typing import Any

import torch

from domino_train.data.base_module import DominoDataModule
from domino_train.data.rows import Rows

LABELS = ("text", "target")


class TokenizedDataModule(DominoDataModule):
    """Tokenized sets written by `domino-data` (+ their feature caches for offline training).

    `path` / `features_path` is the first training set; `more_sets` adds others ({path, features_path}
    each), trained on together. Validation holds `val_size` random rows of `path` out, or, with
    `val_path`, uses `val_size` random rows of that set (rows whose id also occurs in a training set are
    dropped from training). `labels: target` trains on the target's own next tokens stored in the
    caches (distillation, see `method.objectives.block_targets`); `text` on the tokens themselves.
    """

    def __init__(
        self,
        path: str,
        features_path: str | None = None,
        more_sets: list[dict[str, Any]] | None = None,
        val_path: str | None = None,
        val_features_path: str | None = None,
        labels: str = "text",
        batch_size: int = 2,
        val_size: int = 64,
        max_length: int = 3072,
        num_workers: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__(batch_size, val_size, max_length, num_workers, seed)
        if labels not in LABELS:
            raise ValueError(f"data.labels must be one of {LABELS}, got {labels!r}")
        self.path, self.features_path, self.labels = path, features_path, labels
        self.more_sets = [dict(s) for s in more_sets or []]
        self.val_path, self.val_features_path = val_path, val_features_path
        bad = [s for s in self.more_sets if set(s) - {"path", "features_path"} or "path" not in s]
        if bad:
            raise ValueError(f"data.more_sets entries are {{path, features_path}}; got {bad}")
        have = [bool(s.get("features_path")) for s in self._train_specs()]
        if val_path:
            have.append(bool(val_features_path))
        if any(have) and not all(have):
            raise ValueError("either every data set has a features_path (offline) or none has (online features)")

    def _train_specs(self) -> list[dict[str, Any]]:
        return [{"path": self.path, "features_path": self.features_path}, *self.more_sets]

    def _open(self, path: str, features_path: str | None) -> tuple[Any, Any, dict[str, Any]]:
        from domino_train.data.feature_cache import FeatureCache
        from domino_train.data.tokenize import load_tokenized

        rows, manifest = load_tokenized(path)
        features = None
        if features_path:
            features = FeatureCache(features_path)
            if len(features) != len(rows):
                raise ValueError(
                    f"feature cache {features_path} has {len(features)} rows but the data set "
                    f"{path} has {len(rows)}: rebuild the cache (`domino-data stages=[cache]`)"
                )
            if self.labels == "target" and not features.has_next_ids:
                features.next_ids(0)  # raises the rebuild message
        return rows, features, manifest

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        opened = [self._open(s["path"], s.get("features_path")) for s in self._train_specs()]
        self.manifest = (
            opened[0][2]
            if len(opened) == 1 and not self.val_path
            else {
                "sets": [
                    {"path": s["path"], "manifest": m} for s, (_, _, m) in zip(self._train_specs(), opened, strict=True)
                ]
            }
        )
        with_next = self.labels == "target" and opened[0][1] is not None
        if not self.val_path:
            rows, features, _ = opened[0]
            self._split(rows, len(rows), features)
            sets = [(r, f) for r, f, _ in opened]
            indices = self.train_set.indices + [(k, j) for k in range(1, len(sets)) for j in range(len(sets[k][0]))]
            self.train_set = Rows(sets, indices, self.max_length, with_next)
            self.val_set = Rows(sets, self.val_set.indices, self.max_length, with_next)
            return
        val_rows, val_features, val_manifest = self._open(self.val_path, self.val_features_path)
        self.manifest["validation"] = {"path": self.val_path, "manifest": val_manifest}
        n = len(val_rows)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(self.seed)).tolist()
        val_idx = sorted(order[: self.val_size])
        held_out = set(val_rows.select(val_idx)["id"]) if "id" in val_rows.column_names else set()
        sets = [(r, f) for r, f, _ in opened] + [(val_rows, val_features)]
        train_idx, overlap = [], 0
        for k, (rows, _) in enumerate(sets[:-1]):
            ids = rows["id"] if held_out and "id" in rows.column_names else [None] * len(rows)
            for j, row_id in enumerate(ids):
                if row_id in held_out:
                    overlap += 1
                else:
                    train_idx.append((k, j))
        if not train_idx:
            raise ValueError("no training rows are left once the validation rows are held out")
        self.manifest["validation"]["dropped_from_training"] = overlap
        self.train_set = Rows(sets, train_idx, self.max_length, with_next)
        self.val_set = Rows(sets, [(len(sets) - 1, j) for j in val_idx], self.max_length, with_next)

    @property
    def feature_layer_ids(self) -> list[int] | None:
        if not self.features_path:
            return None
        from domino_train.data.feature_cache import FeatureCache

        layer_ids = {tuple(FeatureCache(s["features_path"]).layer_ids) for s in self._train_specs()}
        if self.val_path:
            layer_ids.add(tuple(FeatureCache(self.val_features_path).layer_ids))
        if len(layer_ids) > 1:
            raise ValueError(f"the feature caches hold different target layers {sorted(layer_ids)}: rebuild them alike")
        return list(layer_ids.pop())
