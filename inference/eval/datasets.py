"""The prompt sets of a decoding run: loaded by name before the target, then decoded set by set, a resumed
run taking the records it already holds instead of decoding those prompts again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from inference.eval.loop import run_dataset
from inference.eval.prompt_sets import BenchmarkPrompt, load_benchmark
from inference.eval.records import Record
from inference.targets.adapter import TargetModel


def load_benchmarks(cfg: DictConfig) -> dict[str, list[BenchmarkPrompt]]:
    """{set name: prompts} of `cfg.bench`, from `cfg.bench_data`'s local copies where given."""
    data_paths = OmegaConf.to_container(cfg.bench_data, resolve=True) if cfg.bench_data else {}
    return dict(load_benchmark(spec, data_paths, cfg.bench_hub) for spec in cfg.bench)


def run_benchmarks(
    cfg: DictConfig,
    benchmarks: dict[str, list[BenchmarkPrompt]],
    decoders: dict[str, Any],
    target: TargetModel,
    previous: list[Record],
    on_prompt: Callable[[list[Record]], None],
    noise_window: int | None,
) -> list[Record]:
    """Every set decoded by every method; `previous` = the records a resumed run holds, `on_prompt` gets
    each newly finished prompt's records."""
    records = []
    for name, prompts in benchmarks.items():
        held: dict[str, list[Record]] = {}
        for r in previous:
            if r.dataset == name:
                held.setdefault(r.prompt_id, []).append(r)
        records += run_dataset(
            name,
            prompts,
            decoders,
            target,
            cfg.max_new_tokens,
            cfg.seed,
            cfg.progress,
            cfg.max_turns,
            done=held,
            on_prompt=on_prompt,
            noise_window=noise_window,
        )
    return records
