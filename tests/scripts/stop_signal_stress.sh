#!/usr/bin/env bash
# SIGTERM sent from outside (as Slurm sends it at a job's time limit) at a
# random moment of CPU training, N times: every run must stop with its
# checkpoint ("stopped by SIGTERM", exit 1), none may crash or hang. A
# signal handler that ran on a compute thread's stack corrupted the heap in
# about one run in twenty (oneDNN's GEMM kernels point rsp into the heap for
# a moment; core/stop_signal.cpp): "corrupted size vs. prev_size", or a
# segfault whose handler (UCX's) then waited forever for malloc's lock; the
# fixed build takes the signal on a thread of its own.
#   stop_signal_stress.sh MRMF_BINARY [RUNS] [THREADS]
# Prints the count of clean stops, crashes, hangs (no end 60 s after the
# signal: killed) and other ends; exit 1 unless every run stopped cleanly.
set -euo pipefail
MRMF=$1 RUNS=${2:-4} THREADS=${3:-2}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export MRMF_DEVICE=cpu HDF5_USE_FILE_LOCKING=FALSE
"$MRMF" datagen neuron-inverter --out "$D/ni.h5" --train 2048 --val 256 --test 64 --seed 1 >/dev/null
# The application's own model at full resolution (1600 x 3): its convolutions
# and FC layers are oneDNN GEMMs, where the signal used to land.
cat >"$D/run.yaml" <<YAML
model: {name: neuron_inverter}
data: {format: neuron_inverter, path: '$D/ni.h5'}
train: {batch_size: 64}
stop: {max_epochs: 1000}
runtime: {device: cpu, threads: $THREADS}
YAML
clean=0 crashed=0 hung=0 other=0
for ((i = 1; i <= RUNS; i++)); do
  out=$D/run$i
  "$MRMF" train --config "$D/run.yaml" --out "$out" >"$D/log$i" 2>&1 &
  pid=$!
  # Wait until training has started (the first epoch line would come too
  # late on a slow machine: the model summary is printed before step 1),
  # then a random 0.5-2.5 s into it, inside a step's GEMMs most of the time.
  for ((w = 0; w < 600; w++)); do
    grep -q "samples per rank per epoch" "$D/log$i" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  sleep "$(awk -v s=$RANDOM 'BEGIN { printf "%.2f", 0.5 + 2.0 * s / 32767 }')"
  kill -TERM "$pid" 2>/dev/null || true
  for ((w = 0; w < 600; w++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    hung=$((hung + 1))
    echo "run $i: no end 60 s after SIGTERM (killed):"
    tail -3 "$D/log$i"
    continue
  fi
  rc=0
  wait "$pid" || rc=$?
  if ((rc == 1)) && grep -q "stopped by SIGTERM" "$D/log$i" && [[ -f $out/checkpoint.h5 ]]; then
    clean=$((clean + 1))
  elif ((rc == 134 || rc == 139 || rc == 135 || rc == 132)); then
    crashed=$((crashed + 1))
    echo "run $i: crashed (exit $rc):"
    tail -5 "$D/log$i"
  else
    other=$((other + 1))
    echo "run $i: exit $rc, not a clean stop:"
    tail -5 "$D/log$i"
  fi
done
echo "stop_signal_stress: $RUNS runs, $clean stopped with a checkpoint, $crashed crashed, $hung hung, $other other"
((clean == RUNS))
