"""Regeneration throughput: batched greedy generation by the target on real ShareGPT first turns.

    python benchmarks/regenerate.py --batch 16 32 64 128                  # the current generate_batch
    python benchmarks/regenerate.py --batch 16 --dynamic-cache --no-shrink  # as before issue 12

`--dynamic-cache` uses transformers' DynamicCache (a concatenation per step) instead of the in-place
`GrowingKVLayer`; `--no-shrink` keeps finished rows in the batch. Both together are the generation loop
of the previous release. Prompts are the first `--prompts` ShareGPT first turns of the bundled package
(sorted by length, as the regenerate stage batches them); tokens/s counts generated tokens up to each
row's stop token.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from domino_train.data.prepare import prepare
from domino_train.data.shards import read_shards
from domino_train.data.sources import ShareGPTPackage
from inference import load_target
from inference.decoding.batch_generation import generate_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--dynamic-cache", action="store_true")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--work-dir", default="artifacts/bench/regenerate")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target("smollm2")
    if args.dynamic_cache:
        target.new_cache = lambda: DynamicCache(config=target.config)
    prepared = f"{args.work_dir}/prepared"
    prepare({"sharegpt": ShareGPTPackage(name="sharegpt", limit=args.prompts)}, prepared, max_user_turns=1)
    rows = list(read_shards(Path(prepared)))
    prompts = sorted((target.chat_ids([r["conversations"][0]]) for r in rows), key=len)
    shrink = float("inf") if args.no_shrink else 0.25
    cache = "DynamicCache" if args.dynamic_cache else "in-place cache"
    mode = f"{cache}, {'no shrink' if args.no_shrink else 'shrink'}"
    print(f"{len(prompts)} prompts, {args.new_tokens} new tokens, {mode}, threads {torch.get_num_threads()}")
    for bs in args.batch:
        t0, n = time.perf_counter(), 0
        for i in range(0, len(prompts), bs):
            out = generate_batch(target, prompts[i : i + bs], args.new_tokens, shrink_ratio=shrink)
            n += sum(len(g.token_ids) for g in out)
        seconds = time.perf_counter() - t0
        print(f"  batch {bs:>3}: {n} tokens in {seconds:6.1f} s = {n / seconds:6.1f} tokens/s")


if __name__ == "__main__":
    main()
