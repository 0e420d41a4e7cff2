#!/usr/bin/env bash
# Choosing the draft size on validation prompts: fixed tree budgets against `tree.budget=auto`, and the
# whole block against `chain.window=auto`, for the SmolLM2 reference drafters on the recipe's validation
# slice (`bench=[sharegpt:N]`: ShareGPT rows no training step saw; never MT-Bench or HumanEval).
#   launch/smollm2_cost_sweep.sh                 # every run; rerun it to resume (finished runs are skipped)
#   PROMPTS=40 BUDGETS="4 8 16 32 auto" WINDOWS="full auto" REPEAT=16 launch/smollm2_cost_sweep.sh
#   BENCH="mt-bench:40,humaneval:40" BUDGETS="16 auto" REPEAT= OUT=... launch/smollm2_cost_sweep.sh  # report only
#   ARGS="'concurrency=[2,4,8]' interleave=1" WINDOWS= ...  # more overrides for every run; no chain runs
#   PAIRED=1 BUDGETS="2 auto" WINDOWS= ARGS="'concurrency=[4]'" ...  # every size an arm of ONE run
# One domino-decode run per setting (each with its own `ar`, prompt by prompt, in one process), written to
# $OUT/budget_<b>, $OUT/window_<w>; REPEAT names a budget run twice ($OUT/budget_<b>_repeat), which
# measures the run-to-run noise the comparison is judged against. PAIRED puts every budget and window in
# one run ($OUT/paired) as arms (`dominotree/2`), decoded in the same waves (`interleave`) of one process,
# so that comparing sizes is not also comparing two moments of the machine (REPEAT is then ignored: rerun
# into another OUT). Time it on a quiet machine. The table of every run (benchmarks/compare_runs.py) goes
# to $OUT/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=${OUT:-artifacts/runs/decode/cost_sweep}
PROMPTS=${PROMPTS:-40}
BENCH=${BENCH:-sharegpt:$PROMPTS}  # the prompts: choose on validation; the evaluation sets only to report the choice
DRAFTERS=${DRAFTERS:-pretrained}  # holds smollm2-135m-domino and smollm2-135m-dflash

eval "extra=(${ARGS:-})"  # the shell's quoting, as on a command line
runs=()
decode() {  # run dir, then overrides
  local dir=$1
  shift
  runs+=("$dir")
  if [[ -f "$dir/results.json" ]]; then
    echo "== $dir: done"
    return
  fi
  "$BIN/domino-decode" preset=smollm2 "bench=[$BENCH]" num_threads="${THREADS:-2}" progress=false \
    drafter_path="$DRAFTERS/smollm2-135m-domino" baseline_drafter_path="$DRAFTERS/smollm2-135m-dflash" \
    hydra.run.dir="$dir" "$@" "${extra[@]}"
}

if [[ -n "${PAIRED:-}" ]]; then
  # one run, every size an arm of it (`ddtree/8`, `domino/auto`): the sizes share the process and the waves
  arms=ar
  for budget in ${BUDGETS-4 8 16 32 auto}; do arms+=",ddtree/$budget,dominotree/$budget"; done
  for window in ${WINDOWS-full auto}; do arms+=",dflash/$window,domino/$window"; done
  decode "$OUT/paired" "methods=[$arms]"
else
  for budget in ${BUDGETS-4 8 16 32 auto}; do
    decode "$OUT/budget_$budget" "methods=[ar,ddtree,dominotree]" tree.budget="$budget"
  done
  if [[ -n "${REPEAT-16}" ]]; then
    decode "$OUT/budget_${REPEAT-16}_repeat" "methods=[ar,ddtree,dominotree]" tree.budget="${REPEAT-16}"
  fi
  for window in ${WINDOWS-full auto}; do
    [[ $window == full ]] && value=null || value=$window
    decode "$OUT/window_$window" "methods=[ar,dflash,domino]" chain.window="$value"
  done
fi
"$BIN/python" benchmarks/compare_runs.py "${runs[@]}" | tee "$OUT/summary.md"
