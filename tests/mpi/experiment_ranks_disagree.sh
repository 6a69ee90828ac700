#!/usr/bin/env bash
# Ranks launched with different experiment flags (here the methods) would
# run different plans and wait in different collectives forever: the job
# must end at once with a non-zero status naming the disagreement, before
# anything is trained or written.
#   experiment_ranks_disagree.sh MPIEXEC MRMF_BINARY
set -uo pipefail
MPIEXEC=$1 MRMF=$2
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
CMD=("$MRMF" experiment --config "$DIR/exp.yaml" --out "$DIR/out")
start=$(date +%s)
timeout 90 "$MPIEXEC" -n 1 "${CMD[@]}" --methods baseline : -n 1 "${CMD[@]}" --methods baseline mrt >"$DIR/log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
tail -4 "$DIR/log"
echo "exit status $rc after ${elapsed} s"
if [[ $rc -eq 0 ]]; then echo "FAIL: the job succeeded although its ranks disagree"; exit 1; fi
if [[ $rc -eq 124 || $elapsed -ge 60 ]]; then echo "FAIL: the job took ${elapsed} s (>= 60 s) to end"; exit 1; fi
grep -q "ranks disagree on the experiment" "$DIR/log" || { echo "FAIL: the disagreement was not named"; exit 1; }
if grep -q "epoch   0" "$DIR/log"; then echo "FAIL: a rank trained before the check"; exit 1; fi
echo "PASS: the job ended with status $rc in ${elapsed} s, naming the disagreement"
