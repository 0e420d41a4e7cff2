#!/usr/bin/env bash
# The SmolLM2-135M reference drafters, end to end on a CPU: data, then the Domino and DFlash drafters.
# Every stage runs in the default precision (`dtype: auto`: bf16 on a CPU with avx512_bf16 / AMX).
#   launch/smollm2_recipe.sh            # every stage; rerun it to resume where it stopped
#   RUN_ID=r2 launch/smollm2_recipe.sh  # another training run on the same data
#   TRAIN_THREADS=2                     # threads per training (default 1: both share the 2 cores)
#   VARIANTS="ttt no_curriculum" launch/smollm2_recipe.sh  # the ablations, same data, steps and seed
#   EXTEND_FROM=r2 RUN_ID=r3 MAX_STEPS=9600 launch/smollm2_recipe.sh
#                                       # continue run r2's final checkpoint to 9,600 steps: the cosine LR
#                                       # re-stretched over the longer run, the curriculum kept where it was
#   EXTEND_FROM=r3 RUN_ID=r4 MAX_STEPS=12900 TRAIN_DATA=smollm2_recipe_more launch/smollm2_recipe.sh
#                                       # the same, on the data plus two more regenerated slices (conf/data/)
#   DATA_RECIPE=mix TRAIN_DATA=smollm2_mix RUN_ID=r5-ce launch/smollm2_recipe.sh
#                                       # ShareGPT + code + math prompts, sampled answers (conf/data/smollm2_mix.yaml)
#   TRAIN_ARGS="train/loss=ce_tv"       # extra overrides for every training (here: match the target's distribution)
#   DATA_ONLY=1                         # build (or resume) the data sets, train nothing
# Each data stage resumes (regeneration by shard, the caches by shard; finished stages are skipped),
# and each training resumes from its run folder's last.ckpt (run_id=$RUN_ID). The slices are disjoint
# rows of the bundled ShareGPT first turns (conf/data/smollm2_recipe{,_more}.yaml); MT-Bench and HumanEval,
# the evaluation sets, are not in ShareGPT.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
RUN_ID=${RUN_ID:-r1}
DATA=${DOMINO_DATA:-artifacts/data}
LOGS=${DOMINO_LOGS:-artifacts/runs}  # where each training's console log goes

FIRST_TURNS="prepare.max_user_turns=1 prepare.max_chars=12000 tokenize.max_length=768"
CACHE="cache.num_draft_layers=4 cache.shard_bytes=268435456 cache.batch_tokens=4096 cache.topk=32"
REGEN="regenerate.max_new_tokens=320 regenerate.shard_size=256 pipeline.backend.batch_size=128 \
  pipeline.backend.max_batch_tokens=76800 regenerate.max_context=768"

# data set name, then its stages' overrides
stage() {
  local name=$1
  shift
  if [[ -f "$DATA/$name/features/index.json" ]]; then
    echo "== $name: done"
    return
  fi
  # shellcheck disable=SC2086
  "$BIN/domino-data" name="$name" $FIRST_TURNS $CACHE "$@"
}

if [[ ${DATA_RECIPE:-sharegpt} == mix ]]; then
  MIX="pipeline/source=smollm2_mix"
  stage smollm2-mix-val stages=[prepare,regenerate,tokenize,cache] $MIX pipeline.source.sources.sharegpt.limit=100 \
    pipeline.source.sources.codeio.limit=50 pipeline.source.sources.gsm_symbolic.limit=50 $REGEN
  stage smollm2-mix-train stages=[prepare,regenerate,tokenize,cache] $MIX pipeline.source.sources.sharegpt.skip=200 \
    pipeline.source.sources.sharegpt.limit=2000 pipeline.source.sources.codeio.skip=50 \
    pipeline.source.sources.codeio.limit=1000 pipeline.source.sources.gsm_symbolic.skip=50 \
    pipeline.source.sources.gsm_symbolic.limit=1000 $REGEN regenerate.temperature="${REGEN_TEMPERATURE:-0.7}"
else
  stage smollm2-val stages=[prepare,regenerate,tokenize,cache] pipeline.source.sources.sharegpt.limit=200 $REGEN
  stage smollm2-regen stages=[prepare,regenerate,tokenize,cache] pipeline.source.sources.sharegpt.skip=200 \
    pipeline.source.sources.sharegpt.limit=2000 $REGEN
fi
stage smollm2-distill stages=[prepare,tokenize,cache] tokenize.input=prepared \
  pipeline.source.sources.sharegpt.skip=2200 pipeline.source.sources.sharegpt.limit=5000
if [[ ${TRAIN_DATA:-} == smollm2_recipe_more ]]; then  # ~25 min each on 2 cores: built only when trained on
  stage smollm2-regen2 stages=[prepare,regenerate,tokenize,cache] pipeline.source.sources.sharegpt.skip=7200 \
    pipeline.source.sources.sharegpt.limit=2000 $REGEN
  stage smollm2-regen3 stages=[prepare,regenerate,tokenize,cache] pipeline.source.sources.sharegpt.skip=9200 \
    pipeline.source.sources.sharegpt.limit=2000 $REGEN
fi

if [[ -n "${DATA_ONLY:-}" ]]; then
  exit 0
fi

# The drafters train side by side, one core each (two 2-thread jobs on 2 cores run far slower); each
# logs to $LOGS/smollm2_<variant>/$RUN_ID.log. The script fails if any training fails.
pids=()
for variant in ${VARIANTS:-domino dflash}; do
  log="$LOGS/smollm2_$variant/$RUN_ID.log"
  mkdir -p "$(dirname "$log")"
  extend=()
  if [[ -n "${EXTEND_FROM:-}" ]]; then
    # lambda reached 0 at the old schedule's last step; keep it there: decay_ratio = old steps / new steps
    old_steps=$(sed -n 's/^  max_steps: \([0-9]*\).*/\1/p' conf/experiment/smollm2_domino.yaml)  # every smollm2 variant inherits it
    extend=(trainer.max_steps="$MAX_STEPS" train.decay_ratio="$(awk "BEGIN {print $old_steps / $MAX_STEPS}")")
    if [[ ! -e "$LOGS/smollm2_$variant/$RUN_ID/checkpoints/last.ckpt" ]]; then  # later: resume RUN_ID itself
      extend+=(ckpt_path="$LOGS/smollm2_$variant/$EXTEND_FROM/checkpoints/last.ckpt")
    fi
  fi
  data=()
  if [[ -n "${TRAIN_DATA:-}" ]]; then
    data=(data="$TRAIN_DATA")  # another data config (default: the experiment's smollm2_recipe)
  fi
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=${TRAIN_THREADS:-1} "$BIN/domino-train" experiment=smollm2_$variant run_id="$RUN_ID" \
    "${data[@]}" "${extend[@]}" ${TRAIN_ARGS:-} >>"$log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit $status
