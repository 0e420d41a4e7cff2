"""`domino-decode`: measure tau, speedup and losslessness of decoding methods on benchmark prompts.

Hydra config `conf/decode.yaml` (the target comes from the `conf/target/` group shared with training).
Everything that can be refused is refused before the target is loaded: unknown methods or benchmarks,
a missing prompt set, and a drafter that does not fit the target (the checkpoint validator's message).
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from inference.decoding.api import DECODING_METHODS, build_decoder
from inference.decoding.chain.verify import VERIFY_RULES
from inference.decoding.sampling import SamplingParams
from inference.decoding.tree.verify import TREE_VERIFY_RULES
from inference.drafter import DominoDrafter
from inference.eval.loop import run_dataset, warm_up
from inference.eval.prompt_sets import load_benchmark
from inference.eval.results import write_outputs
from inference.targets.loader import default_dtype, load_target_config

log = logging.getLogger("domino-decode")
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"  # the repository's Hydra tree (editable installs)


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
        if DECODING_METHODS[m].family == "ar":  # no drafter
            continue
        baseline = DECODING_METHODS[m].baseline and cfg.baseline_drafter_path
        path = cfg.baseline_drafter_path if baseline else cfg.drafter_path
        if not path:
            raise ValueError(f"method {m!r} needs a drafter: set drafter_path=PATH")
        paths[m] = str(path)
    return paths


def run(cfg: DictConfig, out_dir: Path) -> dict[str, Any]:
    """The whole evaluation; returns the report written to `out_dir/results.json`."""
    methods = list(cfg.methods)
    unknown = [m for m in methods if m not in DECODING_METHODS]
    if unknown or not methods:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(DECODING_METHODS)}")
    if cfg.verify not in VERIFY_RULES:
        raise ValueError(f"unknown verify rule {cfg.verify!r}; choose one of {', '.join(VERIFY_RULES)}")
    if cfg.tree.verify not in TREE_VERIFY_RULES:
        raise ValueError(f"unknown tree.verify rule {cfg.tree.verify!r}; choose one of {', '.join(TREE_VERIFY_RULES)}")
    tree = {k: cfg.tree[k] for k in ("budget", "top_m", "node_topk")}
    sampling = SamplingParams(cfg.temperature, cfg.top_k, cfg.top_p)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    data_paths = OmegaConf.to_container(cfg.bench_data) if cfg.bench_data else {}
    benchmarks = dict(load_benchmark(spec, data_paths, cfg.bench_hub) for spec in cfg.bench)

    paths = _drafter_paths(cfg, methods)
    drafters: dict[str, DominoDrafter] = {}
    if paths:
        # The target's device and dtype as `load_target` will choose them, so the drafter loads straight
        # into them (casting a built module would also round its fp32 RoPE table).
        device = cfg.target.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = getattr(torch, cfg.target.dtype) if cfg.target.get("dtype") else default_dtype(device)
        target_config = load_target_config(cfg.target.spec)
        for path in dict.fromkeys(paths.values()):
            drafters[path] = DominoDrafter.from_pretrained(path, target_config, device=device, dtype=dtype)

    target = hydra.utils.instantiate(cfg.target)
    for drafter in drafters.values():
        drafter.bind_target(target.embed_tokens, target.lm_head)
    decoders = {
        m: build_decoder(
            m,
            target,
            drafters[paths[m]] if m in paths else None,
            sampling,
            cfg.tree.verify if DECODING_METHODS[m].family == "tree" else cfg.verify,
            max_context=cfg.max_context,
            sync_stages=cfg.stage_timings,
            tree=tree,
            cuda_graph=cfg.cuda_graph,
        )
        for m in methods
    }
    log.info(
        "target %s on %s (%s); methods %s; benchmarks %s",
        target.name,
        target.device,
        target.dtype,
        methods,
        list(benchmarks),
    )
    if cfg.warmup_tokens:
        warm_up(decoders, target, cfg.warmup_tokens)
    records = []
    for name, prompts in benchmarks.items():
        records += run_dataset(
            name, prompts, decoders, target, cfg.max_new_tokens, cfg.seed, cfg.progress, cfg.max_turns
        )
    meta = {
        "target": target.name,
        "drafter": str(cfg.drafter_path) if cfg.drafter_path and drafters else None,
        "baseline_drafter": str(cfg.baseline_drafter_path) if cfg.baseline_drafter_path else None,
        "device": str(target.device),
        "dtype": str(target.dtype).removeprefix("torch."),
        "temperature": cfg.temperature,
        "verify": cfg.verify,
        "tree": {**tree, "verify": cfg.tree.verify},
        "max_new_tokens": cfg.max_new_tokens,
        "torch": torch.__version__,
        "git_commit": _git_commit(),
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    report = write_outputs(out_dir, records, check_lossless=sampling.greedy and "ar" in methods, meta=meta)
    print((out_dir / "results.md").read_text())
    log.info("results in %s", out_dir)
    return report


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="decode")
def main(cfg: DictConfig) -> None:
    run(cfg, Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir))


if __name__ == "__main__":
    main()
