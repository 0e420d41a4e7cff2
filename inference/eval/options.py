"""A decoding run's options from `conf/decode.yaml`, checked before anything loads: the counts, the
decoding options of each method family, and the settings a resumed run must match."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf

from inference.decoding.methods import check_options, method_spec
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.sampling import SamplingParams
from inference.eval.arms import arm_method, arm_options, check_arms
from inference.eval.concurrency import concurrency_levels

# (key, least value, null allowed): counts checked before anything loads
COUNTS = (("max_new_tokens", 1, False), ("max_turns", 1, True), ("warmup_tokens", 0, False), ("interleave", 0, False))


@dataclass(frozen=True)
class MethodOptions:
    """The sampling, the `DecodeOptions` of each method family (ar, chain, tree) and the tree's options."""

    sampling: SamplingParams
    by_family: dict[str, DecodeOptions]
    tree: TreeOptions

    def of(self, arm: str) -> tuple[DecodeOptions, TreeOptions]:
        """The `DecodeOptions` and `TreeOptions` an arm (`dominotree`, `dominotree/2`: `inference.eval.arms`)
        decodes with."""
        return arm_options(arm, self.by_family[method_spec(arm_method(arm)).family], self.tree)


def run_methods(cfg: DictConfig) -> list[str]:
    """The arms to run (methods, each maybe at its own draft size), refused when none is given or one is
    malformed (`inference.eval.arms`)."""
    arms = [str(m) for m in cfg.methods]
    check_arms(arms)
    return arms


def check_counts(cfg: DictConfig) -> None:
    """Refuse a count the run would otherwise trip over only after the target has loaded."""
    for key, least, nullable in COUNTS:
        value = cfg[key]
        if (value is None and nullable) or (isinstance(value, int) and not isinstance(value, bool) and value >= least):
            continue
        raise ValueError(f"{key} must be an integer >= {least}{' or null' if nullable else ''}, got {value!r}")
    threads = cfg.num_threads
    if not (
        threads is None
        or threads == "auto"
        or (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1)
    ):
        raise ValueError(f"num_threads must be auto, null or an integer >= 1, got {threads!r}")
    concurrency_levels(cfg.concurrency)


def method_options(cfg: DictConfig, methods: list[str]) -> MethodOptions:
    """The options every method of the run decodes with, each checked against its method."""
    sampling = SamplingParams(cfg.temperature, cfg.top_k, cfg.top_p)
    base = DecodeOptions(
        sampling,
        cfg.verify,
        max_context=cfg.max_context,
        sync_stages=cfg.stage_timings,
        cuda_graph=cfg.cuda_graph,
        draft_gate=cfg.draft_gate,
    )
    chain = replace(base, chain_window=cfg.chain.window)
    by_family = {"ar": base, "chain": chain, "tree": replace(base, verify=cfg.tree.verify)}
    tree = TreeOptions(cfg.tree.budget, cfg.tree.top_m, cfg.tree.node_topk, cfg.tree.expand_width, cfg.tree.max_budget)
    options = MethodOptions(sampling, by_family, tree)
    for arm in methods:
        check_options(arm_method(arm), options.of(arm)[0])
    return options


def measured_settings(cfg: DictConfig) -> dict[str, Any]:
    """What the records of a run depend on: a resumed run must match it (threads, progress and warm-up not)."""
    keys = ("target", "drafter_path", "baseline_drafter_path", "methods", "verify", "cuda_graph", "draft_gate")
    keys += ("chain", "tree")
    keys += ("bench", "concurrency", "interleave")
    keys += ("bench_data", "max_turns", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "max_context")
    got = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in keys}
    got["bench_data"] = {k: v for k, v in got["bench_data"].items() if v}  # only the sets given a copy
    return got
