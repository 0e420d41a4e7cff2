#!/usr/bin/env bash
# The ablation table's decoding: each SmolLM2 variant's chain (domino) and tree (dominotree) against plain
# decoding, at the smollm2 preset (cost-aware trees), on 40 MT-Bench first turns + 40 HumanEval prompts;
# the first variant's run also decodes the DFlash baselines (dflash, ddtree), whose drafter is the no-head
# ablation. Time it on a quiet machine.
#   launch/smollm2_ablations_decode.sh                   # RUN_ID=r2 exports; rerun it to resume
#   VARIANTS="domino ttt" RUN_ID=r3 OUT=... launch/smollm2_ablations_decode.sh
# Each variant decodes from artifacts/runs/smollm2_<variant>/$RUN_ID/export into $OUT/<variant>, with its
# own `ar` (speedups compare within a run); the table of every run (benchmarks/compare_runs.py) goes to
# $OUT/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
RUN_ID=${RUN_ID:-r2}
RUNS=${DOMINO_LOGS:-artifacts/runs}
OUT=${OUT:-$RUNS/decode/ablations_$RUN_ID}
BENCH=${BENCH:-mt-bench:40,humaneval:40}

dirs=()
methods="ar,dflash,domino,ddtree,dominotree"
for variant in ${VARIANTS:-domino ttt no_curriculum}; do
  dir="$OUT/$variant"
  dirs+=("$dir")
  if [[ -f "$dir/results.json" ]]; then
    echo "== $dir: done"
  else
    "$BIN/domino-decode" preset=smollm2 "bench=[$BENCH]" num_threads="${THREADS:-2}" progress=false \
      "methods=[$methods]" drafter_path="$RUNS/smollm2_$variant/$RUN_ID/export" \
      baseline_drafter_path="$RUNS/smollm2_dflash/$RUN_ID/export" hydra.run.dir="$dir"
  fi
  methods="ar,domino,dominotree"  # the baselines once
done
"$BIN/python" benchmarks/compare_runs.py "${dirs[@]}" | tee "$OUT/summary.md"
