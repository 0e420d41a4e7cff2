"""What this machine is, as decoding sees it: CPU and flags, threads, read bandwidth, the kernel table of
the target's linear shapes, the measured precision choice, and the verify curve in AR steps before and
after the engine (HF eager, plain kernels, the precision rule -> lean engine, measured kernels, measured
precision).

    python benchmarks/platform_report.py                       # SmolLM2-135M, windows 1..32
    python benchmarks/platform_report.py --threads 1 --no-curve

Every figure of docs/results carries this output for the machine it was measured on. (Not named
`platform.py`: run as a script, a file of that name in this folder would shadow the standard `platform`
module for every benchmark here.)
"""

from __future__ import annotations

import argparse

import torch

from inference import load_target
from inference.decoding.cost_model import measure_verify_curve
from inference.kernels.choice import candidate_precisions, resolve_precision
from inference.kernels.linear import ROW_BUCKETS
from inference.kernels.memory import read_bandwidth, step_bytes
from inference.kernels.table import KernelTable, cpu_model
from inference.precision import cpu_flags, resolve_dtype
from inference.targets.lean_forward import forward_linears
from inference.targets.loader import load_target_config

FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx_vnni", "bf16", "sve")
ROWS = (1, 4, 8, 16, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="smollm2")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--prompt", type=int, default=200, help="cached prompt tokens before a verified window")
    parser.add_argument("--windows", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--no-curve", action="store_true", help="skip the verify curves (the slow part)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    flags = cpu_flags()
    print(f"CPU: {cpu_model()} | flags: {' '.join(f for f in FLAGS if f in flags) or '-'}")
    print(
        f"threads {torch.get_num_threads()} | torch {torch.__version__} | "
        f"capability {torch.backends.cpu.get_cpu_capability()}"
    )
    bandwidth = read_bandwidth()
    print(f"read bandwidth: {bandwidth / 1e9:.1f} GB/s (fastest sum over 512 MiB)")

    config = load_target_config(args.target)
    table = KernelTable.load()
    linears = forward_linears(config)
    print(f"\nkernel table ({table.path}): ms per call, the chosen kernel marked *")
    for precision in candidate_precisions():
        table.measure(precision, [(s, b) for s, b, _ in linears])
        for shape, bias, _ in linears:
            cells = []
            for rows in ROWS:
                bucket = next(b for b in ROW_BUCKETS if b >= rows)
                times = table.entries[f"{precision}:{shape[0]}x{shape[1]}{'+b' if bias else ''}:r{bucket}"]
                best = min(times, key=times.__getitem__)
                cells.append(f"{rows}: {best}* {times[best] * 1e3:.2f}")
            print(f"  {precision:12} {shape[0]:>6}x{shape[1]:<6} " + " | ".join(cells))
    table.save()

    choice = resolve_precision("auto", "cpu", linears)
    print(f"\ndtype auto -> {choice.name} ({choice.how}); tokens/s score per precision: {choice.scores}")
    print("  linears' ms per forward of k tokens: " + "; ".join(f"{p} {c}" for p, c in choice.forward_ms.items()))

    if args.no_curve:
        return
    rule = str(resolve_dtype("auto", "cpu")).removeprefix("torch.")
    setups = {
        f"before: hf, plain, {rule} (rule)": dict(dtype=rule, engine="hf", prepack=False),
        "after: engine auto, kernels auto, dtype auto": dict(dtype="auto", engine="auto", prepack="auto"),
    }
    curves = {}
    for label, kwargs in setups.items():
        target = load_target(args.target, device="cpu", **kwargs)
        layers = [1, 10, 18, 27][: config.num_hidden_layers]
        curve = measure_verify_curve(target, args.prompt, args.windows, layers, far=None)
        curves[label] = (dict(zip(curve.windows, curve.seconds, strict=True)), step_bytes(target) / bandwidth)
        print(f"{label}: {target.precision_name}, {target.engine} engine, {target.kernel_policy.describe()} kernels")
        del target
    print(f"\nverify curve after a {args.prompt}-token prompt: ms (AR steps); the limit = weight bytes / bandwidth")
    for label, (times, limit) in curves.items():
        step = times[min(times)]
        cells = " | ".join(f"{k}: {t * 1e3:.1f} ({t / step:.2f})" for k, t in times.items())
        print(f"  {label}\n    {cells}\n    one-token step = {step / limit:.2f}x the limit ({limit * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
