"""What a decode does when another process takes a core: threads, OpenMP wait policy and pinning.

    python benchmarks/busy_machine.py                  # every setting, quiet and beside one spinning process
    python benchmarks/busy_machine.py --tokens 48 --competitors 0 1

Each setting runs `ar` on the target (default precision and engine) in a fresh process, since OpenMP
reads its environment once: three fixed instructions (not benchmark prompts) x `--tokens` greedy tokens,
after one untimed warm-up generation. A competitor is `python -c "while True: pass"`, started before and
killed after each run. Settings:
- `N threads`: torch's default OpenMP (libgomp; a thread at a barrier spins ~300,000 times before
  sleeping);
- `passive`: `OMP_WAIT_POLICY=PASSIVE` (a waiting thread sleeps at once);
- `spin N`: `GOMP_SPINCOUNT=N` (a short spin, then sleep);
- `pinned`: `OMP_PROC_BIND=close OMP_PLACES=cores` (each thread on its own core).
Prints output tokens per second per setting and competitor count, and the CPU model it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {
    "2 threads": ({}, 2),
    "2 threads, passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, 2),
    "2 threads, spin 1k": ({"GOMP_SPINCOUNT": "1000"}, 2),
    "2 threads, spin 3k": ({"GOMP_SPINCOUNT": "3000"}, 2),
    "2 threads, spin 10k": ({"GOMP_SPINCOUNT": "10000"}, 2),
    "2 threads, spin 30k": ({"GOMP_SPINCOUNT": "30000"}, 2),
    "2 threads, pinned, spin 10k": ({"GOMP_SPINCOUNT": "10000", "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, 2),
    "2 threads, pinned": ({"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, 2),
    "2 threads, passive, pinned": ({"OMP_WAIT_POLICY": "PASSIVE", "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, 2),
    "1 thread": ({}, 1),
}
PROMPTS = (
    "Explain how a refrigerator keeps food cold.",
    "Write a short poem about autumn leaves.",
    "List three ways to save water at home.",
)


def worker(target: str, tokens: int) -> None:
    """Decode the prompts with `ar` in this process; print one JSON line."""
    import torch

    from inference import load_target
    from inference.decoding import DecodeOptions, build_decoder

    loaded = load_target(target)
    decoder = build_decoder("ar", loaded, options=DecodeOptions(stop_token_ids=[]))
    prompts = [loaded.chat_ids([{"role": "user", "content": p}]) for p in PROMPTS]
    decoder.generate(prompts[0], 8)
    began, made = time.perf_counter(), 0
    for ids in prompts:
        made += len(decoder.generate(ids, tokens).tokens)
    seconds = time.perf_counter() - began
    print(json.dumps({"tok_s": made / seconds, "threads": torch.get_num_threads(), "engine": loaded.engine}))


def run_setting(env: dict[str, str], threads: int, competitors: int, target: str, tokens: int) -> float:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(competitors)]
    try:
        time.sleep(0.5)
        cmd = [sys.executable, __file__, "--worker", "--target", target, "--tokens", str(tokens)]
        full_env = {**os.environ, **env, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(cmd, env=full_env, capture_output=True, text=True, check=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    return json.loads(done.stdout.strip().splitlines()[-1])["tok_s"]


def cpu_model() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="smollm2")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--competitors", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.target, args.tokens)
        return
    print(f"{cpu_model()}, {os.cpu_count()} CPUs; ar on {args.target}, {len(PROMPTS)} prompts x {args.tokens} tokens")
    header = "".join(f"{f'{n} spinning':>14}" for n in args.competitors)
    print(f"{'setting':<24}{header}   (output tokens/s)")
    for name in args.settings:
        env, threads = SETTINGS[name]
        rates = [run_setting(env, threads, n, args.target, args.tokens) for n in args.competitors]
        print(f"{name:<24}" + "".join(f"{r:>14.1f}" for r in rates), flush=True)


if __name__ == "__main__":
    main()
