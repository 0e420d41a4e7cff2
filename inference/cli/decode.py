"""`domino-decode`: measure tau, speedup and losslessness of decoding methods on benchmark prompts.

Hydra config `conf/decode.yaml` (the target comes from the `conf/target/` group shared with training).
Everything that can be refused is refused before the target is loaded: unknown methods, verify rules,
tree options or benchmarks, a missing prompt set, a drafter that does not fit the target (the checkpoint
validator's message) and a plain DFlash drafter for a method that needs the Domino head.

Each finished prompt's records go to `records.jsonl` in the run directory as it finishes; rerunning the
same command with `hydra.run.dir=<that directory>` resumes a stopped run without redoing finished prompts,
and the result files are always rebuilt from all the records.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from domino_conf import CONF_DIR
from inference.cli.config_keys import refuse_unknown_keys
from inference.cli.errors import one_line_errors, refuse_slips
from inference.cli.target_folder import target_folder_overrides
from inference.decoding.api import build_decoder
from inference.decoding.methods import DECODING_METHODS, check_drafter, check_options, method_spec
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.sampling import SamplingParams
from inference.decoding.speculative import SpeculativeDecoder
from inference.drafter import DominoDrafter
from inference.eval.loop import run_dataset, warm_up
from inference.eval.machine_load import LoadMonitor, free_cores
from inference.eval.prompt_sets import load_benchmark
from inference.eval.records import RecordLog
from inference.eval.results import write_outputs
from inference.kernels.choice import resolve_precision
from inference.targets.adapter import TargetModel
from inference.targets.engine import engine_report
from inference.targets.lean_forward import forward_linears
from inference.targets.loader import load_target

log = logging.getLogger("domino-decode")
# (key, least value, null allowed): counts checked before anything loads
COUNTS = (("max_new_tokens", 1, False), ("max_turns", 1, True), ("warmup_tokens", 0, False))


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    except OSError:
        return None
    return out.stdout.strip() or None


def _drafter_paths(cfg: DictConfig, methods: list[str]) -> dict[str, str]:
    """The drafter folder each drafting method uses: `baseline_drafter_path` (when set) for the no-head
    baselines (dflash, ddtree), `drafter_path` for the rest."""
    paths = {}
    for m in methods:
        if not DECODING_METHODS[m].needs_drafter:
            continue
        baseline = DECODING_METHODS[m].baseline and cfg.baseline_drafter_path
        path = cfg.baseline_drafter_path if baseline else cfg.drafter_path
        if not path:
            raise ValueError(f"method {m!r} needs a drafter: set drafter_path=PATH")
        paths[m] = str(path)
    return paths


def _mask_token_id(target: TargetModel) -> int | None:
    """The target's MASK id for drafter configs that leave it out; None when its tokenizer offers none
    (a drafter config must then name its own, and loading says so)."""
    try:
        return target.mask_token_id
    except ValueError:
        return None


def _verify_window(decoders: dict[str, Any]) -> int:
    """The widest window a method of the run verifies at once (a chain its block, a tree its largest budget
    + 1): the noise floor of the lossless check is measured over that many tokens."""
    return max((d.max_window() for d in decoders.values() if isinstance(d, SpeculativeDecoder)), default=16)


def _measure_costs(decoders: dict[str, Any], target: TargetModel, benchmarks: dict) -> dict[str, Any]:
    """Time the verify curve of every cost-aware decoder after the run's median first-turn prompt length."""
    aware = {m: d for m, d in decoders.items() if isinstance(d, SpeculativeDecoder) and d.cost_aware}
    if not aware:
        return {}
    lengths = sorted(
        len(target.chat_ids([{"role": "user", "content": p.turns[0]}])) for ps in benchmarks.values() for p in ps
    )
    prompt_tokens = lengths[len(lengths) // 2] if lengths else 64
    return {m: d.measure_costs(prompt_tokens).to_dict() for m, d in aware.items()}


def _cost_report(decoders: dict[str, Any], verify_curves: dict[str, Any]) -> dict[str, Any]:
    """Per cost-aware method: its verify curve, its drafting costs and its acceptance map at the run's end."""
    report = {}
    for m, curve in verify_curves.items():
        d = decoders[m]
        report[m] = {"verify_curve": curve, "draft_fixed_s": d.fixed_s.value(), "acceptance": d.acceptance.to_dict()}
        if getattr(d, "step_s", None) is not None:
            report[m]["draft_step_s"] = d.step_s.value()
    return report


def _measured_settings(cfg: DictConfig) -> dict[str, Any]:
    """What the records of a run depend on: a resumed run must match it (threads, progress and warm-up not)."""
    keys = ("target", "drafter_path", "baseline_drafter_path", "methods", "verify", "cuda_graph", "chain", "tree")
    keys += ("bench",)
    keys += ("bench_data", "max_turns", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "max_context")
    got = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in keys}
    got["bench_data"] = {k: v for k, v in got["bench_data"].items() if v}  # only the sets given a copy
    return got


def _check_counts(cfg: DictConfig) -> None:
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


def run(cfg: DictConfig, out_dir: Path) -> dict[str, Any]:
    """The whole evaluation; returns the report written to `out_dir/results.json`."""
    methods = list(cfg.methods)
    if not methods:
        raise ValueError(f"no methods given; choose from {', '.join(DECODING_METHODS)}")
    _check_counts(cfg)
    sampling = SamplingParams(cfg.temperature, cfg.top_k, cfg.top_p)
    base = DecodeOptions(
        sampling, cfg.verify, max_context=cfg.max_context, sync_stages=cfg.stage_timings, cuda_graph=cfg.cuda_graph
    )
    chain = replace(base, chain_window=cfg.chain.window)
    options = {"ar": base, "chain": chain, "tree": replace(base, verify=cfg.tree.verify)}
    tree = TreeOptions(cfg.tree.budget, cfg.tree.top_m, cfg.tree.node_topk, cfg.tree.expand_width, cfg.tree.max_budget)
    for m in methods:
        check_options(m, options[method_spec(m).family])
    if cfg.num_threads == "auto" and torch.device(cfg.target.get("device") or "cpu").type == "cpu":
        threads = free_cores()
        if threads < (os.cpu_count() or 1):
            log.warning("other processes are using the CPU: decoding on the %d free core(s)", threads)
        torch.set_num_threads(threads)
    elif isinstance(cfg.num_threads, int):
        torch.set_num_threads(cfg.num_threads)
    data_paths = OmegaConf.to_container(cfg.bench_data, resolve=True) if cfg.bench_data else {}
    benchmarks = dict(load_benchmark(spec, data_paths, cfg.bench_hub) for spec in cfg.bench)

    paths = _drafter_paths(cfg, methods)
    record_log = RecordLog(out_dir)
    previous = record_log.start(_measured_settings(cfg))
    if previous:
        log.info("resuming %s: %d generations already recorded", out_dir, len(previous))
    # The target's device and precision as `load_target` will take them, decided first so that the drafters
    # are checked (before the target is loaded) and load straight into them (casting a built module would
    # also round its fp32 RoPE table); the target then gets that same precision.
    device = cfg.target.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    described = load_target(cfg.target.spec, device="meta", mask_token_id=cfg.target.get("mask_token_id"))
    precision = resolve_precision(cfg.target.get("dtype"), device, forward_linears(described.config))
    drafters: dict[str, DominoDrafter] = {}
    for path in dict.fromkeys(paths.values()):
        drafters[path] = DominoDrafter.from_pretrained(
            path, described.config, device=device, dtype=precision.dtype, mask_token_id=_mask_token_id(described)
        )
    for m, path in paths.items():
        check_drafter(m, drafters[path])

    target = hydra.utils.instantiate(cfg.target, dtype=precision.name)
    target.precision = precision  # with how it was chosen and the measured scores
    for drafter in drafters.values():
        drafter.bind_target(target.embed_tokens, target.lm_head)
    decoders = {
        m: build_decoder(m, target, drafters.get(paths.get(m)), options[method_spec(m).family], tree) for m in methods
    }
    log.info(
        "target %s on %s (%s, %s engine, %s kernels); methods %s; benchmarks %s",
        target.name,
        target.device,
        target.precision_name,
        target.engine,
        target.kernel_policy.describe() if target.kernel_policy else "plain",
        methods,
        list(benchmarks),
    )
    load = LoadMonitor()
    verify_curves = _measure_costs(decoders, target, benchmarks)
    if cfg.warmup_tokens:
        warm_up(decoders, target, cfg.warmup_tokens)
    check_lossless = sampling.greedy and "ar" in methods
    noise_window = _verify_window(decoders) if check_lossless else None
    records = []
    for name, prompts in benchmarks.items():
        held = {}
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
            on_prompt=record_log.append,
            noise_window=noise_window,
        )
    meta = {
        "target": target.name,
        "drafter": str(cfg.drafter_path) if cfg.drafter_path and drafters else None,
        "baseline_drafter": str(cfg.baseline_drafter_path) if cfg.baseline_drafter_path else None,
        "device": str(target.device),
        "dtype": str(target.dtype).removeprefix("torch."),
        "precision": target.precision_name,
        "engine": target.engine,
        "precision_choice": target.precision.to_dict() if target.precision else None,
        "kernels": engine_report(target),
        "temperature": cfg.temperature,
        "verify": cfg.verify,
        "noise_window": noise_window,
        "cost_model": _cost_report(decoders, verify_curves),
        "tree": {**asdict(tree), "verify": cfg.tree.verify},
        "max_new_tokens": cfg.max_new_tokens,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "torch": torch.__version__,
        "git_commit": _git_commit(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    machine_load = load.report()
    meta["machine_load"] = machine_load
    if machine_load and machine_load.get("warning"):
        meta["warning"] = machine_load["warning"]
        log.warning(machine_load["warning"])
    report = write_outputs(out_dir, records, check_lossless=check_lossless, meta=meta)
    print((out_dir / "results.md").read_text())
    log.info("results in %s", out_dir)
    return report


# Overrides whose key is not in conf/decode.yaml, where Hydra's own hint ("use +drafter=...") would mislead.
SLIPS = {
    "drafter": "the drafter folder is `drafter_path=PATH` (`baseline_drafter_path=PATH` for dflash / ddtree)",
    "baseline_drafter": "the baselines' drafter folder is `baseline_drafter_path=PATH`",
    "method": "methods are a list: `methods=[ar,domino]`",
}


def _run_dir() -> Path:
    return Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="decode")
@one_line_errors("domino-decode", resume=lambda cfg: ("hydra.run.dir", _run_dir()))
def _decode(cfg: DictConfig) -> None:
    log.info("run folder: %s", _run_dir())
    run(cfg, _run_dir())


def main() -> None:
    """The `domino-decode` console script."""
    sys.argv[1:] = target_folder_overrides("domino-decode", CONF_DIR, sys.argv[1:])  # before Hydra reads them
    refuse_slips("domino-decode", sys.argv[1:], SLIPS)
    refuse_unknown_keys("domino-decode", CONF_DIR, "decode", sys.argv[1:])
    _decode()


if __name__ == "__main__":
    main()
