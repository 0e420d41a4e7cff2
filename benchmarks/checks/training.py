"""Stage 3: training steps on the GPU paths: flex-attention vs SDPA masks in bf16, and ZeRO-2 through the recipe.

Flex vs SDPA: a Qwen3-4B-shaped drafter (2 draft layers, random weights) against a random stand-in
target of Qwen3-4B's width, heads and vocabulary with 2 layers (so both fit next to each other), features
computed online by that target. The same batch and anchors go through `DominoLitModule._step` under
bf16 autocast (what `precision=bf16-mixed` does) with the flex-attention `BlockMask` and with the SDPA
boolean mask; the two losses must agree within bf16 tolerance. Then a few full steps (forward, backward,
AdamW) per mask: tokens/s and peak memory.

ZeRO-2: `experiment=qwen3_4b_curriculum` (trainer=gpu, strategy=deepspeed_stage_2, bf16-mixed: the
8-GPU recipe's config path) with the tiny target (in bf16, as the recipe's targets) and data, one device,
2 optimizer steps, a ZeRO checkpoint, then the export.

Dry run: the tiny Qwen3 target itself (6 layers), fp32 on the CPU (flex forward only: it has no CPU
backward), and the ZeRO-2 run on DeepSpeed's CPU accelerator; no throughput is claimed.
"""

from __future__ import annotations

import contextlib
import shutil
import time

import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import open_dict

from checks.context import CheckFailed, Context, table
from domino_train import CONF_DIR
from domino_train.method.module import DominoLitModule
from domino_train.run.train import train
from inference.drafter.config import DrafterConfig
from inference.targets.adapter import TargetModel
from inference.targets.loader import load_target_config
from inference.targets.tiny import tiny_target

LOSS_RTOL = 2e-2  # bf16 keeps 8 bits of mantissa: flex and SDPA reduce in different orders


def stand_in_target(spec: str, num_layers: int, device: str, dtype: torch.dtype) -> TargetModel:
    """A random target with `spec`'s width, heads and vocabulary but `num_layers` layers (no weights needed)."""
    from transformers import AutoModelForCausalLM

    hf = load_target_config(spec)
    hf.num_hidden_layers = num_layers
    if getattr(hf, "layer_types", None):  # one entry per layer (full / sliding attention)
        hf.layer_types = hf.layer_types[:num_layers]
    hf._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf, dtype=dtype)
    return TargetModel(model, name=f"random {spec} x {num_layers} layers")


def _module(target: TargetModel, config: DrafterConfig, num_anchors: int, device: str) -> DominoLitModule:
    module = DominoLitModule(drafter_config=config, target=lambda **_: target, num_anchors=num_anchors)
    module.target = target
    module.drafter.to(device).bind_target(target.embed_tokens, target.lm_head)
    module.lambda_t = lambda: 0.5  # both losses mixed, as mid-curriculum (no trainer here)
    return module


def _batch(vocab: int, b: int, t: int, device: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    loss_mask = torch.zeros(b, t, dtype=torch.long)
    loss_mask[:, t // 4 :] = 1
    batch = {
        "input_ids": torch.randint(0, vocab, (b, t), generator=g),
        "loss_mask": loss_mask,
        "attention_mask": torch.ones(b, t, dtype=torch.long),
    }
    return {k: v.to(device) for k, v in batch.items()}


def _step_loss(module: DominoLitModule, batch: dict, flex: bool, autocast) -> float:
    module.hparams.flex_attention = "on" if flex else "off"
    with torch.no_grad(), autocast():
        return float(module._step(batch, torch.Generator().manual_seed(1))["loss"])


def _throughput(module, batch, flex: bool, autocast, steps: int, ctx: Context) -> dict:
    module.hparams.flex_attention = "on" if flex else "off"
    opt = torch.optim.AdamW(module.drafter.parameters(), lr=1e-4)
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(steps + 1):  # the first step warms up (kernels, flex's mask, allocator)
        ctx.sync()
        t0 = time.perf_counter()
        with autocast():
            loss = module._step(batch, torch.Generator().manual_seed(2 + i))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ctx.sync()
        times.append(time.perf_counter() - t0)
    step_s = sorted(times[1:])[len(times[1:]) // 2]
    peak = torch.cuda.max_memory_allocated() / 2**30 if ctx.device == "cuda" else float("nan")
    del opt
    return {"step_ms": 1e3 * step_s, "tokens_per_s": batch["input_ids"].numel() / step_s, "peak_gib": peak}


def flex_vs_sdpa(ctx: Context) -> tuple[dict, list]:
    if ctx.dry_run:
        target, layer_ids, b, t, anchors, steps = tiny_target("qwen3"), None, 2, 48, 4, 1
        drafter_kw = dict(num_draft_layers=2, block_size=8, gru_hidden_dim=32, correction_rank=16)
        autocast = contextlib.nullcontext
    else:
        target = stand_in_target("Qwen/Qwen3-4B", 2, ctx.device, ctx.dtype)
        layer_ids, b, t, anchors, steps = [0, 1], 2, 1024, 64, 3
        drafter_kw = dict(num_draft_layers=2, block_size=16)  # the recipe's head (GRU 1024, rank 256)

        def autocast():
            return torch.autocast("cuda", dtype=torch.bfloat16)

    mask = target.mask_token_id
    config = DrafterConfig.from_target_config(
        target.config, target_layer_ids=layer_ids, mask_token_id=mask, **drafter_kw
    )
    module = _module(target, config, anchors, ctx.device)
    batch = _batch(config.vocab_size, b, t, ctx.device)
    flex_loss, sdpa_loss = _step_loss(module, batch, True, autocast), _step_loss(module, batch, False, autocast)
    gap = abs(flex_loss - sdpa_loss) / max(abs(sdpa_loss), 1e-6)
    masks = ("sdpa",) if ctx.dry_run else ("flex", "sdpa")  # flex has no backward on the CPU
    runs = {mask: _throughput(module, batch, mask == "flex", autocast, steps, ctx) for mask in masks}
    results = {"shape": target.name, "batch": [b, t], "anchors": anchors, "flex_loss": flex_loss}
    results |= {"sdpa_loss": sdpa_loss, "relative_gap": gap, "runs": runs}
    rows = [[m, r["step_ms"], r["tokens_per_s"], r["peak_gib"]] for m, r in runs.items()]
    title = f"{target.name}: batch {b} x {t}, {anchors} anchors, loss flex {flex_loss:.4f} vs SDPA {sdpa_loss:.4f}"
    tables = [table(title, ["mask", "step ms", "tokens/s", "peak GiB"], rows)]
    tol = LOSS_RTOL if ctx.dtype == torch.bfloat16 else 1e-4
    if gap > tol:
        raise CheckFailed(f"flex and SDPA losses differ by {gap:.2e} (relative), more than {tol}", results, tables)
    return results, tables


def zero2_step(ctx: Context) -> dict:
    """Two optimizer steps and the export with the recipe's ZeRO-2 strategy on one device."""
    overrides = [
        "experiment=qwen3_4b_curriculum",
        "target=tiny",
        "data=tiny",
        "logger=none",
        "trainer.devices=1",
        "trainer.max_steps=2",
        "trainer.accumulate_grad_batches=1",
        "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false",
        "data.max_length=128",
        "drafter.num_draft_layers=2",
        "callbacks.model_checkpoint.every_n_train_steps=2",  # a ZeRO checkpoint at the last step
    ]
    if ctx.dry_run:  # the recipe's trainer=gpu otherwise: DeepSpeed's CPU accelerator, in fp32
        overrides += ["trainer.accelerator=cpu", "trainer.precision=32-true"]
    else:  # as the recipe's Qwen3 targets: DeepSpeed's bf16 drafter meets a bf16 embedding and lm_head
        overrides += ["target.dtype=bfloat16"]
    run_dir = ctx.out_dir / "zero2_run"
    shutil.rmtree(run_dir, ignore_errors=True)  # ckpt_path=auto would resume a previous check's run
    GlobalHydra.instance().clear()
    with initialize_config_dir(CONF_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.root_dir, cfg.paths.output_dir = str(run_dir), str(run_dir / "run")
    t0 = time.perf_counter()
    metrics = train(cfg)
    export, zero_dir = run_dir / "run" / "export", run_dir / "run" / "checkpoints" / "last.ckpt"
    if not any((zero_dir / "checkpoint").glob("*optim_states.pt")):
        raise CheckFailed(f"{zero_dir} is no DeepSpeed ZeRO checkpoint (no */*optim_states.pt): was ZeRO-2 used?")
    if not (export / "model.safetensors").is_file():
        raise CheckFailed(f"the ZeRO-2 run wrote no export in {export}")
    return {"wall_s": time.perf_counter() - t0, "train_loss": metrics.get("train/loss"), "overrides": overrides}


def run(ctx: Context) -> tuple[dict, list]:
    results, tables = flex_vs_sdpa(ctx)
    zero = zero2_step(ctx)
    results["zero2"] = zero
    tables.append(
        table(
            "ZeRO-2 through experiment=qwen3_4b_curriculum",
            ["wall s", "train/loss"],
            [[zero["wall_s"], zero["train_loss"]]],
        )
    )
    return results, tables
