"""Stage 7: the target's engine on the GPU: `ar`'s step and verify windows of 1-32 tokens on Hugging Face's
eager forward, the lean loop, and the lean loop's steps captured as CUDA graphs (`engine: graphed`), so
the first lent GPU shows what capture changes there.

Both run SmolLM2-135M in bf16 on the same prompt (`inference.decoding.cost_model.measure_verify_curve`:
the median of 7 forwards per window after a 200-token prompt, features of the drafter's layers captured
as verification does). On a GPU an eager forward is launch-bound at batch 1, so the table is the
`hf` and `lean` rows show the launch-bound cost and `graphed` what capture wins; its row also counts the
graphs captured and the seconds they took (paid before any clock starts in `domino-decode`'s warm-up).
Dry run: the tiny target on the CPU in fp32, without `graphed` (no timing claimed).
"""

from __future__ import annotations

import torch

from checks.context import Context, table
from inference import load_target
from inference.decoding.cost_model import measure_verify_curve
from inference.targets.engine import engine_report

WINDOWS = [1, 2, 4, 8, 16, 32]


@torch.inference_mode()
def run(ctx: Context) -> tuple[dict, list]:
    spec, prompt, layers = ("tiny-qwen3", 16, [1, 3]) if ctx.dry_run else ("smollm2", 200, [1, 10, 18, 27])
    results, rows = {}, []
    engines = ("hf", "lean") if ctx.dry_run else ("hf", "lean", "graphed")
    for engine in engines:
        target = load_target(spec, dtype=ctx.dtype, device=ctx.device, engine=engine)
        curve = measure_verify_curve(target, prompt, WINDOWS, layers, far=None)
        step = curve.seconds[0]
        results[engine] = {"windows": curve.windows, "ms": [s * 1e3 for s in curve.seconds]}
        results[engine].update(engine_report(target).get("graphs", {}))
        rows.append([engine, *(f"{s * 1e3:.2f} ({s / step:.2f})" for s in curve.seconds)])
        del target
    note = "dry run, no timing claimed" if ctx.dry_run else "SmolLM2-135M bf16, 200-token prompt"
    header = ["engine", *(f"{w} tokens: ms (steps)" for w in WINDOWS)]
    return results, [table(f"{note}; median of 7 forwards per window", header, rows)]
