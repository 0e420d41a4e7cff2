"""Time one training step of an experiment's drafter and split it into lm_head, draft layers and the rest.

    python benchmarks/train_step.py experiment=smollm2_domino            # the SmolLM2 recipe
    python benchmarks/train_step.py experiment=smollm2_domino drafter.draft_vocab_size=null  # one lever off

Arguments are the training config's Hydra overrides. The step runs in the training's precision
(`trainer.precision`, auto = bf16 autocast on a CPU with bf16 instructions: `inference.precision`;
`trainer.precision=32-true` for fp32). The step is `DominoLitModule._step` + backward + the clip + (fused) AdamW, on the
experiment's drafter and real target (its frozen embedding and lm_head), with random
token rows of `--seq-len` tokens (`--assistant` of them loss-masked) and random bf16 context features in
place of a feature cache (which stores bf16): the cost of a step depends on the shapes, not on the values.
Prints blocks/s (anchor blocks trained per second) and the share of the step spent
- in the lm_head: logits of every draft position, their cross-entropy, and its backward (what a draft
  vocabulary shrinks);
- in the draft layers: context K/V projection and the layers, forward and backward;
- elsewhere: fc, the head's GRU and correction, metrics, the optimizer.
The parts are timed separately on the same shapes (median of `--repeats`), so the shares are estimates.

`--profile` also runs two steps under the PyTorch profiler and prints the ops that took the most time,
then the step's matrix products (GFLOP, and GFLOP/s while they ran) next to what this machine's plain
matrix product reaches on a 2048 x 2048 x 2048 problem in the step's precision: when the two are close,
a faster step needs fewer FLOPs, not better kernels.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

from domino_train import CONF_DIR
from domino_train.method.module import DominoLitModule, clip_gradients
from domino_train.method.objectives import sample_anchors
from domino_train.run.train import drafter_config
from inference.drafter.block_mask import anchor_attention_mask
from inference.precision import resolve_training_precision, training_target_dtype


def median_seconds(fn: Callable[[], None], repeats: int, autocast: bool = False) -> float:
    """Median seconds of `fn()` after one warm-up call, under bf16 CPU autocast when `autocast`."""
    context = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if autocast else contextlib.nullcontext
    with context():
        fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        with context():
            fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="training config overrides, e.g. experiment=smollm2_domino")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--assistant", type=float, default=0.7, help="share of each row's tokens in the loss")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--profile", action="store_true", help="top ops and the GEMM rate against the machine's")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    with initialize_config_dir(CONF_DIR, version_base="1.3"):
        cfg = compose("train", overrides=args.overrides)
    precision = resolve_training_precision(cfg.trainer.precision, cfg.trainer.accelerator)
    autocast = precision == "bf16-mixed"
    target = instantiate(
        cfg.target, dtype=training_target_dtype(cfg.target.dtype, precision), prepack=False, engine="hf"
    )
    config = drafter_config(cfg, target)
    train = OmegaConf.to_container(cfg.train, resolve=True)
    module = DominoLitModule(drafter_config=config, target=lambda **_: target, **train)
    module.target = target
    drafter = module.drafter.bind_target(target.embed_tokens, target.lm_head)
    module.lambda_t = lambda: 0.5  # the step mixes both losses, as mid-curriculum
    if drafter.vocab.is_subset:  # any N ids: the cost does not depend on which
        drafter.vocab.set_ids(torch.arange(config.draft_vocab_size))

    b, t = cfg.data.batch_size, args.seq_len
    g = torch.Generator().manual_seed(0)
    vocab = config.vocab_size
    batch = {
        "input_ids": torch.randint(0, vocab, (b, t), generator=g),
        "loss_mask": torch.zeros(b, t, dtype=torch.long),
        "attention_mask": torch.ones(b, t, dtype=torch.long),
        "features": torch.randn(b, t, config.num_context_features * config.hidden_size, generator=g).bfloat16(),
    }
    batch["loss_mask"][:, int(t * (1 - args.assistant)) :] = 1
    opt = module.optimizer(fused=precision != "16-mixed")  # as `DominoLitModule.configure_optimizers` on one device
    clip = cfg.trainer.get("gradient_clip_val")

    def full_step() -> None:
        r = module._step(batch, torch.Generator().manual_seed(1))
        opt.zero_grad()
        r["loss"].backward()
        if clip:
            clip_gradients(drafter.parameters(), clip, cfg.trainer.get("gradient_clip_algorithm") or "norm")
        opt.step()

    anchors = sample_anchors(batch["loss_mask"], train["num_anchors"], torch.Generator().manual_seed(1))
    blocks = int((anchors >= 0).sum())
    n_pos = blocks * config.num_draft_tokens
    hidden = torch.randn(n_pos, config.hidden_size, requires_grad=True)
    labels = torch.randint(0, config.output_vocab_size, (n_pos,))
    heads = 2 if drafter.head is not None else 1  # base and final CE

    def lm_head_part() -> None:
        logits = drafter.lm_head(hidden)
        loss = sum(F.cross_entropy(logits, labels) for _ in range(heads))
        loss.backward()

    fused = drafter.backbone.fuse(batch["features"].float()).detach().requires_grad_(True)  # fc is counted in "rest"

    def layers_part() -> None:
        positions = torch.arange(t).expand(b, t)
        context = drafter.backbone.context_kv(fused, positions)
        bs = config.block_size
        mask = anchor_attention_mask(anchors, t, bs, groups=train["anchor_groups"])
        block_ids = torch.full((b, anchors.shape[1], bs), config.mask_token_id)
        embeds = drafter.embed(block_ids.view(b, -1)).detach()
        pos = (anchors.clamp(min=0).unsqueeze(-1) + torch.arange(bs)).view(b, -1)
        drafter.backbone(embeds, pos, context, mask).sum().backward()

    step_s = median_seconds(full_step, args.repeats, autocast)
    lm_s = median_seconds(lm_head_part, args.repeats, autocast)
    layers_s = median_seconds(layers_part, args.repeats, autocast)
    rest_s = max(step_s - lm_s - layers_s, 0.0)
    overrides = " ".join(args.overrides) or "(defaults)"
    print(f"overrides: {overrides}; precision {precision}; threads {torch.get_num_threads()}")
    print(
        f"drafter: {config.num_hidden_layers} layers, block {config.block_size}, head {config.head}, "
        f"logits over {config.output_vocab_size} ids; batch {b} x {t} tokens, {blocks} blocks per step"
    )
    print(f"step {step_s * 1e3:.0f} ms  ->  {blocks / step_s:.1f} blocks/s")
    for name, s in (("lm_head + CE", lm_s), ("draft layers", layers_s), ("rest", rest_s)):
        print(f"  {name:<13} {s * 1e3:7.0f} ms  {100 * s / step_s:5.1f} %")
    if args.profile:
        profile_step(full_step, autocast)


def gemm_rate(autocast: bool, n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of one n x n x n matrix product on this machine (bf16 under autocast, else fp32)."""
    dtype = torch.bfloat16 if autocast else torch.float32
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    return 2 * n**3 / median_seconds(lambda: a @ b, repeats) / 1e9


def profile_step(step: Callable[[], None], autocast: bool, steps: int = 2) -> None:
    """The ops that take a step's time, and how fast its matrix products ran against the machine's rate."""
    from torch.profiler import ProfilerActivity, profile

    context = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if autocast else contextlib.nullcontext
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof, context():
        for _ in range(steps):
            step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    print(f"\nops by self time ({steps} steps, {total / 1e3 / steps:.0f} ms per step):")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]:
        share = 100 * e.self_cpu_time_total / total
        print(f"  {e.key[:60]:<60} {e.self_cpu_time_total / 1e3 / steps:7.1f} ms  {share:5.1f} %")
    gemms = [e for e in events if e.key in ("aten::mm", "aten::addmm", "aten::bmm") and e.flops]
    flops, seconds = sum(e.flops for e in gemms), sum(e.self_cpu_time_total for e in gemms) / 1e6
    if gemms:
        print(
            f"matrix products: {flops / steps / 1e9:.1f} GFLOP per step at {flops / seconds / 1e9:.0f} GFLOP/s "
            f"({100 * seconds / (total / 1e6):.0f} % of the time); this machine: {gemm_rate(autocast):.0f} GFLOP/s "
            "on a 2048^3 product"
        )


if __name__ == "__main__":
    main()
