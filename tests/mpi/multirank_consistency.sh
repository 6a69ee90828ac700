#!/usr/bin/env bash
# Ranks that see different things would compute different things and wait
# in different collectives forever (or, gathering, overflow a buffer): each
# job below must end at once with a non-zero status naming the
# disagreement. (1) experiment ranks with different methods: before anything
# is trained, or different --resume/--force, --out or stage checkpoints;
# (2) train --resume where one rank sees the run's checkpoint and
# the other does not (node-local --out); (3) predict where the ranks read
# different data files (a relative --data from different folders); (4) train
# where the ranks' data sets have the same size but different contents; and
# (5), not an error, a mid-epoch checkpoint of 2 ranks resumed on 1; (6) a
# stop signal (SIGTERM) that reaches one rank only; (7) train --check with
# different configurations.
#   multirank_consistency.sh MPIEXEC MRMF_BINARY
set -uo pipefail
MPIEXEC=$1 MRMF=$(realpath "$2")  # absolute: the predict ranks run in other folders
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
"$MRMF" datagen neuron-inverter --out "$DIR/ni.h5" --train 256 --val 64 --test 64 --time-bins 64 --seed 3 >/dev/null ||
  exit 1
cat >"$DIR/run.yaml" <<YAML
model: {name: neuron_inverter, options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32'}}
data: {format: neuron_inverter, path: '$DIR/ni.h5'}
train: {batch_size: 32, seed: 1}
runtime: {device: cpu}
YAML
cat >"$DIR/exp.yaml" <<YAML
base: run.yaml
experiment: {seeds: [1], target_val_loss: 0.001, max_epochs: 1, ladder: [[2], [1]]}
YAML
export OMP_NUM_THREADS=1 MRMF_DEVICE=cpu HDF5_USE_FILE_LOCKING=FALSE
fail=0
# expect NAME NEEDLE -- MPIEXEC ARGS...: the job must fail within 60 s, naming NEEDLE.
expect() {
  local name=$1 needle=$2
  shift 3
  local start rc elapsed
  start=$(date +%s)
  timeout 90 "$@" >"$DIR/$name.log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  tail -3 "$DIR/$name.log"
  if [[ $rc -eq 0 ]]; then echo "FAIL ($name): the job succeeded although its ranks disagree"; fail=1; return; fi
  if [[ $rc -eq 124 || $elapsed -ge 60 ]]; then echo "FAIL ($name): the job took ${elapsed} s to end"; fail=1; return; fi
  grep -q "$needle" "$DIR/$name.log" || { echo "FAIL ($name): '$needle' not said"; fail=1; return; }
  echo "ok ($name): status $rc in ${elapsed} s"
}

CMD=("$MRMF" experiment --config "$DIR/exp.yaml" --out "$DIR/out")
expect experiment "ranks disagree on the experiment" -- \
  "$MPIEXEC" -n 1 "${CMD[@]}" --methods baseline : -n 1 "${CMD[@]}" --methods baseline mrt
if grep -q "epoch   0" "$DIR/experiment.log"; then echo "FAIL (experiment): a rank trained before the check"; fail=1; fi
# (1b) --resume on one rank only (only those ranks read the saved state: a
# hang), and (1c) another --out on one rank (the run's files split between
# the folders), and stage checkpoints on one rank only.
expect exp_mode "ranks disagree on the command's mode and folder" -- \
  "$MPIEXEC" -n 1 "${CMD[@]}" --methods baseline --resume : -n 1 "${CMD[@]}" --methods baseline --force
E=("$MRMF" experiment --config "$DIR/exp.yaml" --methods baseline)
expect exp_out "ranks disagree on the command's mode and folder" -- \
  "$MPIEXEC" -n 1 "${E[@]}" --out "$DIR/out_a" : -n 1 "${E[@]}" --out "$DIR/out_b"
expect exp_ckpt "experiment.stage_checkpoints false" -- \
  "$MPIEXEC" -n 1 "${CMD[@]}" --methods baseline : -n 1 "${CMD[@]}" --methods baseline \
  --set experiment.stage_checkpoints=false

"$MRMF" train --config "$DIR/run.yaml" --out "$DIR/run" --set stop.max_epochs=1 >/dev/null 2>&1 || exit 1
T=("$MRMF" train --config "$DIR/run.yaml" --resume --set stop.max_epochs=3)
expect resume "ranks disagree on whether to resume" -- \
  "$MPIEXEC" -n 1 "${T[@]}" --out "$DIR/run" : -n 1 "${T[@]}" --out "$DIR/run_elsewhere"

# (2b) --force on one rank only: it set the earlier run aside behind a
# barrier the other rank never reached (a hang SIGTERM could not end).
expect force "ranks disagree on --resume / --force" -- \
  "$MPIEXEC" -n 1 "$MRMF" train --config "$DIR/run.yaml" --out "$DIR/run_f" --force : \
  -n 1 "$MRMF" train --config "$DIR/run.yaml" --out "$DIR/run_f"
# (2c) Each rank resumes its own copy of the run (node-local folders), one
# copy's weights changed: trained one model per rank, silently.
PY=$(for p in python3 /usr/bin/python3; do "$p" -c "import h5py" 2>/dev/null && { echo "$p"; break; }; done)
if [[ -n $PY ]]; then
  cp -r "$DIR/run" "$DIR/run_w1" && cp -r "$DIR/run" "$DIR/run_w2"
  "$PY" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); d=f['model'][sorted(f['model'])[0]]; d[...]=d[()]+0.5" \
    "$DIR/run_w2/checkpoint.h5"
  expect weights "ranks disagree on the weights read from" -- \
    "$MPIEXEC" -n 1 "${T[@]}" --out "$DIR/run_w1" : -n 1 "${T[@]}" --out "$DIR/run_w2"
else
  echo "skipped (weights): no h5py for python3"
fi
mkdir -p "$DIR/a" "$DIR/b"
cp "$DIR/ni.h5" "$DIR/a/data.h5"
"$MRMF" datagen neuron-inverter --out "$DIR/b/data.h5" --train 64 --val 64 --test 200 --time-bins 64 --seed 4 \
  >/dev/null || exit 1
P=(predict --checkpoint "$DIR/run/checkpoint.h5" --data data.h5 --out "$DIR/pred.h5")
expect predict "ranks disagree on the data" -- \
  "$MPIEXEC" -n 1 -wdir "$DIR/a" "$MRMF" "${P[@]}" : -n 1 -wdir "$DIR/b" "$MRMF" "${P[@]}"
# (4) train where the ranks' data sets have the same size but other contents.
"$MRMF" datagen neuron-inverter --out "$DIR/b/same_size.h5" --train 256 --val 64 --test 64 --time-bins 64 --seed 9 \
  >/dev/null || exit 1
cp "$DIR/ni.h5" "$DIR/a/same_size.h5"
T2=("$MRMF" train --config "$DIR/run.yaml" --out "$DIR/run2" --set data.path=same_size.h5 --set stop.max_epochs=1)
expect same_size "ranks disagree on the training and validation data" -- \
  "$MPIEXEC" -n 1 -wdir "$DIR/a" "${T2[@]}" : -n 1 -wdir "$DIR/b" "${T2[@]}"
# (5) Not an error: a checkpoint written mid-epoch by 2 ranks, resumed on 1.
# The rank count changes each rank's order, so that epoch starts again.
T3=("$MRMF" train --config "$DIR/run.yaml" --out "$DIR/run3" --set stop.max_epochs=2 --set train.checkpoint_every_steps=2)
MRMF_FAULT_EXIT=1:3 timeout 90 "$MPIEXEC" -n 2 "${T3[@]}" >"$DIR/mid.log" 2>&1
if timeout 90 "${T3[@]}" --resume >"$DIR/resume1.log" 2>&1 &&
   grep -q "by 2 rank(s); with 1 this epoch starts again from its first batch" "$DIR/resume1.log"; then
  echo "ok (rank count changed mid-epoch): the epoch restarts, said"
else
  tail -5 "$DIR/mid.log" "$DIR/resume1.log"; echo "FAIL (rank count changed mid-epoch)"; fail=1
fi
# (6) Not an error either: SIGTERM reaches one rank only; both stop at the
# same step with a checkpoint, and --resume on 2 ranks finishes the run.
# Inside an epoch (raised when 2 steps are done, the run stops after step 3
# of 4), where each rank's BN running statistics are still its own: the
# resumed run must end exactly as an uninterrupted one. Rank 0's checkpoint
# takes 2 s longer (MRMF_FAULT_SLOW_SAVE_MS): rank 1 must wait for it, and
# the job end in order, not be aborted (which killed rank 0 mid-write).
T4=("$MRMF" train --config "$DIR/run.yaml" --set stop.max_epochs=3)
timeout 90 "$MPIEXEC" -n 2 "${T4[@]}" --out "$DIR/run4_whole" >/dev/null 2>&1
MRMF_FAULT_SIGNAL=1:2 MRMF_FAULT_SLOW_SAVE_MS=2000 timeout 90 "$MPIEXEC" -n 2 "${T4[@]}" --out "$DIR/run4" >"$DIR/sig.log" 2>&1
sig_rc=$?
final() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['final_val_loss'])" "$1/summary.json"; }
# Every epoch's losses (a fresh start would also end at the same numbers:
# the resume itself is checked by its log line).
losses() { python3 -c "import json,sys; print([(j['train_loss'], j['val_loss']) for j in map(json.loads, open(sys.argv[1]))])" "$1/metrics.jsonl"; }
if [[ $sig_rc -ne 0 && $sig_rc -ne 124 ]] && grep -q "stopped by SIGTERM" "$DIR/sig.log" &&
   grep -q "stopped by a stop signal to another rank" "$DIR/sig.log" && [[ -f $DIR/run4/checkpoint.h5 ]] &&
   ! grep -q "MPI_Abort" "$DIR/sig.log" &&
   timeout 90 "$MPIEXEC" -n 2 "${T4[@]}" --out "$DIR/run4" --resume >"$DIR/sig_resume.log" 2>&1 &&
   grep -q "resumed from .* at epoch 0, batch 3 (step 3)" "$DIR/sig_resume.log" &&
   [[ "$(final "$DIR/run4")" == "$(final "$DIR/run4_whole")" ]] &&
   [[ "$(losses "$DIR/run4")" == "$(losses "$DIR/run4_whole")" ]]; then
  echo "ok (a stop signal on one rank): both ranks stopped at one step, resumed to the uninterrupted result"
else
  tail -5 "$DIR/sig.log" "$DIR/sig_resume.log" 2>/dev/null; echo "FAIL (a stop signal on one rank)"; fail=1
fi
# (7) train --check with ranks given different configurations: refused as
# the run itself refuses them (the check said "checked" on rank 0).
TC=("$MRMF" train --config "$DIR/run.yaml" --out "$DIR/run_check" --check)
expect train_check "ranks disagree on the configuration" -- \
  "$MPIEXEC" -n 1 "${TC[@]}" --set train.batch_size=32 : -n 1 "${TC[@]}" --set train.batch_size=16
[[ -e $DIR/run_check ]] && { echo "FAIL (train_check): --check made its --out"; fail=1; }
# Not an error: experiment --check on 2 ranks describes the concurrent run as
# it will run there (its two groups, the exchange with fresh optimizer state).
if timeout 90 "$MPIEXEC" -n 2 "$MRMF" experiment --config "$DIR/exp.yaml" --out "$DIR/exp_check" --methods concurrent \
     --set experiment.optimizer_at_fusion=keep --check >"$DIR/exp_check.log" 2>&1 &&
   grep -q "concurrent/split probe" "$DIR/exp_check.log" && grep -q "concurrent/dense@1 .*on the other group" "$DIR/exp_check.log" &&
   grep -q "concurrent/exchange .*optimizer state fresh" "$DIR/exp_check.log" && [[ ! -e $DIR/exp_check ]]; then
  echo "ok (experiment --check on 2 ranks): the concurrent plan"
else
  tail -12 "$DIR/exp_check.log"; echo "FAIL (experiment --check on 2 ranks)"; fail=1
fi
[[ $fail -eq 0 ]] && echo "PASS: every disagreement ended its job at once, named; the rank-count change and the stop signal were handled"
exit $fail
