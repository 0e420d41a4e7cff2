"""The prompt sets of a decoding run: loaded by name before the target, then decoded set by set, a resumed
run taking the records it already holds instead of decoding those prompts again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from inference.eval.batched_loop import run_dataset_batched
from inference.eval.concurrency import concurrency_levels
from inference.eval.loop import run_dataset
from inference.eval.prompt_sets import BenchmarkPrompt, load_benchmark
from inference.eval.recheck import PrecisionRecheck
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
    on_records: Callable[[list[Record]], None],
    noise_window: int | None,
    recheck: PrecisionRecheck | None = None,
) -> list[Record]:
    """Every set decoded by every method at every concurrency of `cfg.concurrency` (batch 1 first, prompt
    by prompt; above 1 `inference.eval.batched_loop`); `previous` = the records a resumed run holds,
    `on_records` gets each newly finished piece of work's records. A greedy run above concurrency 1 alone
    (`noise_window` set) decodes `ar` at batch 1 too: the lossless check's reference, reported as the
    `ar` arm. `recheck`: a generation flagged by clause (c) alone is decoded again there
    (`inference.eval.recheck`)."""
    records = []
    levels = concurrency_levels(cfg.concurrency)
    if noise_window and "ar" in decoders and 1 not in levels:
        levels = [1, *levels]
    for name, prompts in benchmarks.items():
        mine = [r for r in previous if r.dataset == name]
        batch1: list[Record] = []
        for level in levels:
            held = [r for r in mine if r.concurrency == level]
            if level == 1:
                by_prompt: dict[str, list[Record]] = {}
                for r in held:
                    by_prompt.setdefault(r.prompt_id, []).append(r)
                batch1 = run_dataset(
                    name,
                    prompts,
                    decoders if 1 in concurrency_levels(cfg.concurrency) else {"ar": decoders["ar"]},
                    target,
                    cfg.max_new_tokens,
                    cfg.seed,
                    cfg.progress,
                    cfg.max_turns,
                    done=by_prompt,
                    on_prompt=on_records,
                    noise_window=noise_window,
                    recheck=recheck,
                )
                records += batch1
                continue
            records += run_dataset_batched(
                name,
                prompts,
                decoders,
                target,
                cfg.max_new_tokens,
                level,
                cfg.seed,
                cfg.max_turns,
                done=held,
                on_records=on_records,
                reference=batch1 or None,
                noise_window=noise_window,
                interleave=cfg.interleave,
                recheck=recheck,
            )
    return records
