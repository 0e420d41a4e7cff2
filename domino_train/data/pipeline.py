"""The data pipeline: run the stages chosen by `stages=[...]` (entry point: `domino_train/cli/data.py`).

Each stage writes its own folder under `out_dir` (`FOLDERS`), read by the stages after it; a stage that
would change or redo its folder under a later stage's folder made from it refuses, or with
`overwrite=true` removes that folder (`freshness.py`), so no data set is ever left mixed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from domino_train.data.feature_cache import build_feature_cache
from domino_train.data.prepare import prepare
from domino_train.data.regenerate import regenerate
from domino_train.data.tokenize import tokenize
from inference.decoding.sampling import SamplingParams
from inference.drafter.layout import default_target_layer_ids


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _later(out: Path, stage: str) -> list[Path]:
    """The folders of the stages after `stage`: what is made from its folder."""
    order = list(FOLDERS)
    return [out / FOLDERS[s] for s in order[order.index(stage) + 1 :]]


def _prepare(cfg: DictConfig, out: Path) -> dict[str, Any]:
    sources = {name: instantiate(spec, name=name) for name, spec in cfg.pipeline.source.sources.items()}
    return prepare(sources, out / "prepared", **cfg.prepare, overwrite=cfg.overwrite, dependents=_later(out, "prepare"))


def _regenerate(cfg: DictConfig, out: Path) -> dict[str, Any]:
    backend_cls = get_class(cfg.pipeline.backend._target_)
    target = instantiate(cfg.target, device=None if backend_cls.needs_weights else "meta")
    r = cfg.regenerate
    sampling = SamplingParams(r.temperature, r.top_k, r.top_p)
    extra = {} if backend_cls.needs_weights else {"chat_template_kwargs": target.chat_template_kwargs}
    # Objects go in through a partial: instantiate() would turn a dataclass argument into a config.
    backend = instantiate(cfg.pipeline.backend, _partial_=True)(
        target=target, sampling=sampling, max_new_tokens=r.max_new_tokens, **extra
    )
    if r.max_context is not None:  # a tighter context than the target's: long prompts are dropped
        backend.max_context = min(backend.max_context or r.max_context, r.max_context)
    settings = {
        "max_context": backend.max_context,
        "target": target.name,
        "chat_template_kwargs": target.chat_template_kwargs,
        "sampling": vars(sampling),
        "backend": OmegaConf.to_container(cfg.pipeline.backend),
    }
    return regenerate(
        backend,
        out / "prepared",
        out / "regenerated",
        settings,
        r.max_new_tokens,
        r.seed,
        r.shard_size,
        r.limit,
        cfg.overwrite,
        _later(out, "regenerate"),
        r.check_template,
    )


def _tokenize(cfg: DictConfig, out: Path) -> dict[str, Any]:
    target = instantiate(cfg.target, device="meta")  # tokenizer and template only
    t = cfg.tokenize
    lineage = {
        "prepared": _read_json(out / "prepared" / "summary.json"),
        "regenerated": {
            "settings": _read_json(out / "regenerated" / "settings.json"),
            "summary": _read_json(out / "regenerated" / "summary.json"),
        }
        if t.input == "regenerated"
        else None,
        "source_config": OmegaConf.to_container(cfg.pipeline.source),
    }
    return tokenize(
        target,
        out / t.input,
        out / "tokenized",
        t.max_length,
        t.end_of_turn,
        lineage,
        cfg.overwrite,
        _later(out, "tokenize"),
    )


def _cache(cfg: DictConfig, out: Path) -> dict[str, Any]:
    target = instantiate(cfg.target)
    c = cfg.cache
    layer_ids = list(c.layer_ids or default_target_layer_ids(target.num_layers, c.num_draft_layers))
    return build_feature_cache(
        target,
        out / "tokenized",
        out / "features",
        layer_ids,
        getattr(torch, c.dtype),
        c.shard_bytes,
        c.batch_tokens,
        c.window_rows,
        cfg.overwrite,
        c.topk,
    )


STAGES = {"prepare": _prepare, "regenerate": _regenerate, "tokenize": _tokenize, "cache": _cache}
FOLDERS = {"prepare": "prepared", "regenerate": "regenerated", "tokenize": "tokenized", "cache": "features"}


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run the configured stages in pipeline order; returns each stage's summary."""
    unknown = [s for s in cfg.stages if s not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; choose from {list(STAGES)}")
    out = Path(cfg.out_dir)
    results: dict[str, Any] = {}
    for stage, fn in STAGES.items():
        if stage in cfg.stages:
            print(f"== {stage} -> {out}")
            results[stage] = fn(cfg, out)
    return results
