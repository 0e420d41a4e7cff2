"""Stage 4 (optional), cache: the target's context features of every tokenized row, for offline training.

Only what the drafter consumes is stored: the concatenated outputs of `target_layer_ids` (K * H values
per token, bf16 by default), so the disk cost is `K * H * 2` bytes per token (Qwen3-8B, K = 5: 40 KiB per
token; SmolLM2-135M: 5.6 KiB), plus the target's own greedy next token at every position (`next_ids`,
int32: 4 bytes per token). The latter are the labels of distillation (`data.labels=target`): on text the
target did not write, the target's argmax at position t is what serving would verify after t. With
`topk` > 0 the target's k most likely next tokens and their log-probabilities are stored too (`topk_ids`
int32 and `topk_logprobs` fp32: 8k bytes per token), what the distribution losses train on
(`method/losses.py`).

Rows are streamed through the target in right-padded batches (causal attention: padding after a row
never changes its features), grouped by length inside windows of `window_rows` rows so that padding
stays small, and written in their original order to shards of about `shard_bytes`
(`features-00000.safetensors`: a [tokens, K*H] tensor, `next_ids` and row offsets), so memory stays
bounded. Shards appear atomically; a restarted run continues after the last complete shard, unless
the tokenized set, the target or the layout changed since (`settings.json` records them, with the
set's digest): that is refused, or redone with `overwrite` (`freshness.py`).
`index.json` is written last and is what `FeatureCache` opens.
"""

from __future__ import annotations

import bisect
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm.auto import tqdm

from domino_train.data.batching import length_sorted_batches
from domino_train.data.freshness import claim_folder, content_digest
from domino_train.data.manifest import target_record, timestamp
from domino_train.data.shards import write_json_atomic
from domino_train.data.tokenize import load_tokenized
from domino_train.method.losses import top_distribution
from inference.targets.adapter import TargetModel

INDEX = "index.json"


def _shard_file(folder: Path, k: int) -> Path:
    return folder / f"features-{k:05d}.safetensors"


@torch.inference_mode()
def _forward_rows(
    target: TargetModel, rows: list[list[int]], layer_ids: list[int], dtype: torch.dtype, topk: int
) -> dict[str, torch.Tensor]:
    """Per right-padded row [n, longest, ...] on the CPU: features (in `dtype`), greedy next ids and, with
    `topk`, the target's top-k ids and log-probabilities."""
    longest = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), longest), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        attn[i, : len(r)] = 1
    out = target(ids.to(target.device), attention_mask=attn.to(target.device), layer_ids=layer_ids)
    result = {"features": out.features.to("cpu", dtype), "next_ids": out.logits.argmax(-1).to("cpu", torch.int32)}
    if topk:
        top_ids, top_logprobs = top_distribution(out.logits, topk)
        result.update(topk_ids=top_ids.cpu(), topk_logprobs=top_logprobs.cpu())
    return result


def build_feature_cache(
    target: TargetModel,
    dataset_dir: str | Path,
    out_dir: str | Path,
    layer_ids: list[int],
    dtype: torch.dtype = torch.bfloat16,
    shard_bytes: int = 1 << 30,
    batch_tokens: int = 8192,
    window_rows: int = 256,
    overwrite: bool = False,
    topk: int = 0,
) -> dict[str, Any]:
    """Write the feature shards and `index.json` for the tokenized set at `dataset_dir`."""
    ds, manifest = load_tokenized(dataset_dir)
    out_dir = Path(out_dir)
    bytes_per_token = len(layer_ids) * target.config.hidden_size * torch.empty(0, dtype=dtype).element_size()
    settings = {
        "input_sha256": content_digest(Path(dataset_dir)),
        "target": target_record(target),
        "layer_ids": list(layer_ids),
        "dtype": str(dtype).removeprefix("torch."),
        "shard_bytes": shard_bytes,
        "window_rows": window_rows,
        **({"topk": topk} if topk else {}),  # (caches made before top-k existed keep their settings)
    }
    claim_folder(out_dir, settings, overwrite)
    writer = _ShardWriter(out_dir, shard_tokens=max(1, shard_bytes // (bytes_per_token + 4 + 8 * topk)))
    row = writer.next_row
    bar = tqdm(total=manifest["counts"]["tokens"], desc="cache features", unit=" tok", unit_scale=True)
    bar.update(sum(len(r) for r in ds.select(range(row))["input_ids"]) if row else 0)
    while row < len(ds):
        window = ds.select(range(row, min(row + window_rows, len(ds))))["input_ids"]
        writer.add(row, window, _window_features(target, window, layer_ids, dtype, batch_tokens, topk, bar))
        row += len(window)
    bar.close()
    writer.flush()
    return _write_index(target, dataset_dir, out_dir, ds, manifest, settings, bytes_per_token, writer.shards)


class _ShardWriter:
    """Rows' features gathered in the set's order and written as shards of about `shard_tokens` tokens.

    Shard k holds a contiguous row range and ends on a window boundary, so a resumed run (which starts
    after the last shard written, `next_row`) batches its windows as an uninterrupted one did."""

    def __init__(self, out_dir: Path, shard_tokens: int) -> None:
        self.out_dir, self.shard_tokens = out_dir, shard_tokens
        self.shards = [_read_shard_meta(p) for p in sorted(out_dir.glob("features-*.safetensors"))]
        self.pending: list[dict[str, torch.Tensor]] = []
        self.pending_rows: list[int] = []
        self.pending_tokens = 0

    @property
    def next_row(self) -> int:
        return self.shards[-1]["first_row"] + self.shards[-1]["num_rows"] if self.shards else 0

    def add(self, first_row: int, window: list[list[int]], results: list[dict[str, torch.Tensor]]) -> None:
        """A window's rows (from `first_row`): written out once the pending rows reach a shard's tokens."""
        self.pending.extend(results)
        self.pending_rows.extend(range(first_row, first_row + len(window)))
        self.pending_tokens += sum(len(r) for r in window)
        if self.pending_tokens >= self.shard_tokens:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        tensors = {name: torch.cat([r[name] for r in self.pending]).contiguous() for name in self.pending[0]}
        tensors["offsets"] = torch.tensor([0] + [len(r["features"]) for r in self.pending]).cumsum(0)
        path = _shard_file(self.out_dir, len(self.shards))
        tmp = path.with_name(f".{path.name}.tmp")
        save_file(tensors, str(tmp), metadata={"first_row": str(self.pending_rows[0])})
        os.replace(tmp, path)
        self.shards.append({"file": path.name, "first_row": self.pending_rows[0], "num_rows": len(self.pending_rows)})
        self.pending.clear()
        self.pending_rows.clear()
        self.pending_tokens = 0


def _window_features(
    target: TargetModel,
    window: list[list[int]],
    layer_ids: list[int],
    dtype: torch.dtype,
    batch_tokens: int,
    topk: int,
    bar: tqdm,
) -> list[dict[str, torch.Tensor]]:
    """Each row's tensors (features, next_ids, ...), in the window's order, from length-sorted batches."""
    results: list[dict[str, torch.Tensor] | None] = [None] * len(window)
    for batch in length_sorted_batches([len(r) for r in window], batch_tokens):
        out = _forward_rows(target, [window[i] for i in batch], layer_ids, dtype, topk)
        for j, i in enumerate(batch):
            n = len(window[i])
            results[i] = {name: t[j, :n].clone() for name, t in out.items()}
        bar.update(sum(len(window[i]) for i in batch))
    return results


def _write_index(
    target: TargetModel,
    dataset_dir: str | Path,
    out_dir: Path,
    ds: Any,
    manifest: dict[str, Any],
    settings: dict[str, Any],
    bytes_per_token: int,
    shards: list[dict[str, Any]],
) -> dict[str, Any]:
    """`index.json`: what the cache holds and what it was made from; printed in one line as well."""
    num_tokens = manifest["counts"]["tokens"]
    index = {
        "created": timestamp(),
        "dataset": str(Path(dataset_dir).resolve()),
        "num_rows": len(ds),
        "num_tokens": num_tokens,
        "layer_ids": settings["layer_ids"],
        "width": len(settings["layer_ids"]) * target.config.hidden_size,
        "dtype": settings["dtype"],
        "bytes_per_token": bytes_per_token,
        "topk": settings.get("topk", 0),
        "bytes_total": sum((out_dir / s["file"]).stat().st_size for s in shards),
        "target": target_record(target),
        "dataset_manifest_created": manifest.get("created"),
        "input_sha256": settings["input_sha256"],
        "shards": shards,
    }
    write_json_atomic(out_dir / INDEX, index)
    print(f"cache: {num_tokens} tokens, {bytes_per_token} bytes/token, {index['bytes_total'] / 2**20:.1f} MiB")
    return index


def _read_shard_meta(path: Path) -> dict[str, Any]:
    with safe_open(str(path), framework="pt") as f:
        first = int(f.metadata()["first_row"])
        n = f.get_slice("offsets").get_shape()[0] - 1
    return {"file": path.name, "first_row": first, "num_rows": n}


class FeatureCache:
    """Read side: `cache[i]` is row i's features [T_i, K*H], sliced lazily from its shard."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        index_file = self.path / INDEX
        if not index_file.is_file():
            raise FileNotFoundError(f"{self.path}: no {INDEX}; the feature cache is missing or was not finished")
        self.index = json.loads(index_file.read_text())
        self.layer_ids = self.index["layer_ids"]
        self._starts = [s["first_row"] for s in self.index["shards"]]
        self._offsets: dict[int, torch.Tensor] = {}
        self._handles: dict[int, Any] = {}

    def __len__(self) -> int:
        return self.index["num_rows"]

    def _shard(self, k: int) -> Any:
        if k not in self._handles:  # opened lazily: each DataLoader worker gets its own handles
            handle = safe_open(str(self.path / self.index["shards"][k]["file"]), framework="pt")
            self._handles[k] = handle
            self._offsets[k] = handle.get_tensor("offsets")
        return self._handles[k]

    def _locate(self, row: int) -> tuple[Any, int, int]:
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} outside the cache's {len(self)} rows")
        k = bisect.bisect_right(self._starts, row) - 1
        handle = self._shard(k)
        local = row - self._starts[k]
        return handle, self._offsets[k][local].item(), self._offsets[k][local + 1].item()

    def __getitem__(self, row: int) -> torch.Tensor:
        handle, a, b = self._locate(row)
        return handle.get_slice("features")[a:b]

    @property
    def has_next_ids(self) -> bool:
        """Whether the shards hold the target's greedy next ids (caches written before they were added do not)."""
        return len(self) == 0 or "next_ids" in self._shard(0).keys()

    def next_ids(self, row: int) -> torch.Tensor:
        """The target's greedy next token at every position of row i [T_i] (int32): its distillation labels."""
        if not self.has_next_ids:
            raise ValueError(
                f"feature cache {self.path} holds no next_ids (written by an older domino-data): "
                "rebuild it (`domino-data stages=[cache]`) to train with train.labels=target"
            )
        handle, a, b = self._locate(row)
        return handle.get_slice("next_ids")[a:b]

    @property
    def topk(self) -> int:
        """How many of the target's most likely next tokens each position holds (0: none)."""
        return int(self.index.get("topk", 0))

    def distribution(self, row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Row i's top-k next-token ids [T_i, k] (int32) and log-probabilities [T_i, k] (fp32)."""
        if not self.topk:
            raise ValueError(
                f"feature cache {self.path} holds no top-k distribution: rebuild it with cache.topk=32 "
                "(`domino-data stages=[cache] cache.topk=32 overwrite=true`), or train with online features"
            )
        handle, a, b = self._locate(row)
        return handle.get_slice("topk_ids")[a:b], handle.get_slice("topk_logprobs")[a:b]
