#!/usr/bin/env bash
# A rank that dies mid-training must not leave the others hanging: under
# mpiexec -n 2, rank 1 dies abruptly at step 3 (MRMF_FAULT_EXIT, no
# MPI_Finalize); the job must end with a non-zero status within 60 s and
# the surviving output must show training had started.
#   rank_death.sh MPIEXEC MRMF_BINARY CONFIG
set -uo pipefail
MPIEXEC=$1 MRMF=$2 CONFIG=$3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
"$MRMF" datagen neuron-inverter --out "$DIR/ni.h5" --train 512 --val 64 --test 64 --seed 3 >/dev/null || exit 1
export MRMF_FAULT_EXIT=1:3 OMP_NUM_THREADS=1 MRMF_DEVICE=cpu HDF5_USE_FILE_LOCKING=FALSE
start=$(date +%s)
timeout 90 "$MPIEXEC" -n 2 "$MRMF" train --config "$CONFIG" --out "$DIR/run" --set data.path="$DIR/ni.h5" \
  --set train.batch_size=16 --set stop.max_epochs=50 >"$DIR/log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$DIR/log" | tail -8
echo "exit status $rc after ${elapsed} s"
if [[ $rc -eq 0 ]]; then echo "FAIL: the job succeeded although rank 1 died"; exit 1; fi
if [[ $rc -eq 124 || $elapsed -ge 60 ]]; then echo "FAIL: the job took ${elapsed} s (>= 60 s) to end"; exit 1; fi
grep -q "MRMF_FAULT_EXIT: dying at step 3" "$DIR/log" || { echo "FAIL: the fault was not injected"; exit 1; }
echo "PASS: the job ended with status $rc in ${elapsed} s"
