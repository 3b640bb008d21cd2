#!/usr/bin/env bash
# Issue 34 in ONE GPU window: (i) generation speed before/after + bound + fidelity + step share, (ii) the per-step
# profile, (iii) held-out learning of helper/main with GRPO and two-turn MAGRPO, 3 seeds each as parallel
# processes, (iv) collection. One absolute deadline for the whole script; every phase writes its JSON as it goes.
#
# On the GPU machine, after stage 1 (../shared/gpu/README.md), as stage 2:
#     BUDGET=450 bash .gpu/stage2.sh bash baselines/bench/gpu/speed_and_learning.sh
# CPU try-out with everything shrunk (results in $OUT, a temp folder -- never docs/figures):
#     TINY=1 OUT=$(mktemp -d) bash baselines/bench/gpu/speed_and_learning.sh
#
# Lands in $OUT as it appears (6 files): log.txt, gpu_generation.json (rewritten after every measurement),
# decode_profile.json (after every engine), gpu_learning.json (every 15 s while the runs train: each seed's record
# after its before-evaluation and after every step, "partial": true until its after-evaluation), curves_grpo.png,
# curves_magrpo.png.
# Knobs (env): BUDGET seconds for the whole script (450), TURNS of helper/main (2), SEEDS ("0 1 2"), STEPS cap
# (60; the deadline usually stops training first), EVAL problems (33), RANDOM_WEIGHTS=1 (speed check on random
# weights), SHAPE_DIR (config + tokenizer folder used when the preset fails), PROFILE=0 (skip the profile),
# TINY_SEEDS (the CPU try-out's seeds, "0": one process per scheme on a 2-core machine), LEARN (helper_main: (iii) as
# above; short: (iii) trains the four short-answer configs of docs/training.md "A real model learns on the CPU" --
# the signal code game and Plan-Path, GRPO and AT-GRPO -- at GPU size, SHORT_TASKS tasks per step (64), and (iv)
# writes gpu_learning_short.json in cpu_learning.json's records, so the CPU and GPU rows read as one table).
set -u
OUT=${OUT:?set OUT to the folder that comes back}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-450}
TURNS=${TURNS:-2}
SEEDS=${SEEDS:-0 1 2}
LEARN=${LEARN:-helper_main}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$OUT" "$WORK"
exec > >(tee -a "$OUT/log.txt") 2>&1
start=$(date +%s)
DEADLINE=$(( start + BUDGET ))
left() { echo $(( DEADLINE - $(date +%s) )); }
# a phase's timeout: at most $1 seconds, and never past the deadline less $2 seconds kept for what follows
cap() { local l=$(( $(left) - $2 )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
export TOKENIZERS_PARALLELISM=false

if [ "${TINY:-0}" = 1 ]; then   # the CPU try-out: tiny model, a few rows and tokens, short budgets
  DEV=(--device cpu --dtype fp32); MODEL=(--tiny)
  SPEED=(--tasks 2 --group 2 --max-new-tokens 8 --fidelity-tokens 8 --repeats 1 --share-steps 2 --share-tasks 1
         --share-group 2 --share-micro-batch 2)
  PROFILE_ARGS=(--tasks 2 --group 2 --steps 4 --repeats 1)
  TRAIN=(device=cpu model.path=null rollout.tasks_per_step=1 rollout.group_size=2 generation.max_new_tokens=8
         optim.micro_batch_rows=2 steps=${STEPS:-3})
  SHORT=(device=cpu rollout.tasks_per_step=2 steps=${STEPS:-2}); SHORT_EVAL=${EVAL:-8}
  EVAL=${EVAL:-2}; SPEED_T=150; PROFILE_T=60; LEARN_MIN=90; SEEDS=${TINY_SEEDS:-0}  # 2 processes on 2 cores
else
  DEV=(--device cuda --dtype bf16); MODEL=(--model smollm2-135m-instruct)
  [ "${RANDOM_WEIGHTS:-0}" = 1 ] && MODEL+=(--random-weights)
  SPEED=(--tasks 16 --group 8 --max-new-tokens 192 --fidelity-tokens 64 --repeats 3 --share-steps 3)
  PROFILE_ARGS=(--tasks 16 --group 8 --steps 32 --repeats 1)
  TRAIN=(device=cuda model.dtype=bf16 rollout.tasks_per_step=8 rollout.group_size=8 optim.micro_batch_rows=16
         generation.max_new_tokens=192 steps=${STEPS:-60})
  SHORT=(device=cuda model.dtype=bf16 rollout.tasks_per_step=${SHORT_TASKS:-64}); SHORT_EVAL=${EVAL:-512}
  EVAL=${EVAL:-33}; SPEED_T=170; PROFILE_T=45; LEARN_MIN=150
  nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader || true
  SHAPE=(--model smollm2-135m-instruct --random-weights)
  # convert the preset once, before parallel processes could race on its cache
  if ! timeout 90 $PY -c "from baselines.models.presets import resolve_model as r; print(r('smollm2-135m-instruct'))"; then
    echo "preset unavailable: speed check on random weights from ${SHAPE_DIR:=.gpu/smollm2_shape} (no learning runs)"
    SHAPE=(--model "$SHAPE_DIR" --random-weights); MODEL=("${SHAPE[@]}"); SEEDS=""
  fi
fi
TRAIN+=(log.progress=false "env.kwargs={dataset: humaneval, max_turns: $TURNS, split: train}")
SHORT+=(log.progress=false log.kl_to_start=true)
echo "== plan: budget ${BUDGET} s (deadline $(date -d @$DEADLINE +%T)); speed <= ${SPEED_T} s, profile <= ${PROFILE_T} s, learning >= ${LEARN_MIN} s"

echo "== (i) speed check, $(left) s left"
timeout "$(cap $SPEED_T $LEARN_MIN)" $PY -m baselines.bench.gpu_generation "${MODEL[@]}" "${DEV[@]}" "${SPEED[@]}" \
  --out "$OUT/gpu_generation.json" || echo "speed check: exit $? (figures written so far are in gpu_generation.json)"
# the learning runs sample with the fast path where the speed check found its recorded log-probs to be the sampled
# policy's own (fidelity's sampling_faithful; a failed update statistic alone does not switch it off); else generate
if ! $PY -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r.get('fidelity',{}).get('sampling_faithful') else 1)" \
     "$OUT/gpu_generation.json" 2>/dev/null; then
  echo "fast path not checked or not faithful: the learning runs use generation.decode=generate"
  TRAIN+=(generation.decode=generate); SHORT+=(generation.decode=generate)
fi
if [ "${PROFILE:-1}" = 1 ] && [ "$(left)" -gt $(( LEARN_MIN + 20 )) ]; then
  echo "== (ii) profile per decode step, $(left) s left"
  # random weights: no row stops early, so the difference of two lengths is the cost of the extra steps
  [ "${TINY:-0}" = 1 ] && PMODEL=() || PMODEL=("${SHAPE[@]}")
  timeout "$(cap $PROFILE_T $LEARN_MIN)" $PY -m baselines.bench.decode_profile "${PMODEL[@]}" "${DEV[@]}" \
    "${PROFILE_ARGS[@]}" --json "$OUT/decode_profile.json" 2>&1 | grep -v USDT || echo "profile: exit $?"
fi

# every learning process ends by the deadline less 30 s (collection); heldout_training stops training when the
# time left no longer holds one more step plus its after-evaluation
run_end=$(( DEADLINE - 30 ))
if [ "$LEARN" = short ]; then  # config:scheme of each cell; the configs' own steps
  CELLS="signal_code_smollm2:grpo signal_code_at_grpo_smollm2:at_grpo plan_path_smollm2:grpo plan_path_at_grpo_smollm2:at_grpo"
  LTRAIN=("${SHORT[@]}"); LEVAL=$SHORT_EVAL
else
  CELLS="helper_main_grpo_smollm2:grpo helper_main_magrpo_smollm2:magrpo"; LTRAIN=("${TRAIN[@]}"); LEVAL=$EVAL
fi
echo "== (iii) learning ($LEARN) until $(date -d @$run_end +%T) ($(( run_end - $(date +%s) )) s), seeds $SEEDS"
pids=()
for cell in $CELLS; do
  cfg=${cell%%:*}
  for seed in $SEEDS; do
    timeout $(( run_end - $(date +%s) + 5 )) $PY -m baselines.experiments.heldout_training \
      --config baselines/configs/$cfg.yaml --seeds $seed --eval-episodes $LEVAL \
      --deadline $run_end --out "$WORK/$cfg/seed$seed" "${LTRAIN[@]}" \
      > "$WORK/$cfg.seed$seed.log" 2>&1 &
    pids+=($!)
  done
done
collect() {
  local args=() cell
  if [ "$LEARN" = short ]; then
    for cell in $CELLS; do [ -d "$WORK/${cell%%:*}" ] && args+=(--cell "${cell%%:*}" "${cell##*:}" "$WORK/${cell%%:*}"); done
    $PY -m baselines.experiments.cpu_learning "${args[@]}" --out "$OUT/gpu_learning_short.json"
  else
    for cell in $CELLS; do args+=(--scheme "${cell##*:}" "$WORK/${cell%%:*}"); done
    $PY -m baselines.experiments.gpu_learning "${args[@]}" --out "$OUT/gpu_learning.json"
  fi
}
while :; do  # results into $OUT as they appear: a timeout still returns them
  alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
  [ $alive -eq 0 ] && break
  sleep 10; collect > /dev/null 2>&1
done
for f in "$WORK"/*.log; do echo "-- $f"; grep -E "held-out|seed|Error|error|no time" "$f" | grep -v Warning | tail -6; done
echo "== (iv) collection, $(left) s left"
collect
for cell in $CELLS; do
  cfg=${cell%%:*}; name=${cfg%_smollm2}; [ "$LEARN" = short ] || name=${cell##*:}
  files=$(find "$WORK/$cfg" -name results.json 2>/dev/null)
  [ -n "$files" ] && $PY -m baselines.experiments.heldout_training --combine $files --out "$WORK/combined_$cfg" \
    > /dev/null 2>&1 && cp "$(find "$WORK/combined_$cfg" -name curves.png | head -1)" "$OUT/curves_$name.png"
done
ls -la "$OUT"
echo "done in $(( $(date +%s) - start )) s (budget $BUDGET s)"
