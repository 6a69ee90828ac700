#!/usr/bin/env bash
# The NVTX ranges an Nsight profile of training shows: a tiny 2-rank training
# run with tests/nvtx_recorder/nvtx_recorder.cpp injected (as Nsight injects itself)
# must push every range the trainer marks.
#   nvtx_ranges.sh MRMF_BINARY RECORDER_LIBRARY
set -euo pipefail
MRMF=$1 LIB=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export OMP_NUM_THREADS=1 MRMF_DEVICE=cpu HDF5_USE_FILE_LOCKING=FALSE
"$MRMF" datagen neuron-inverter --out "$D/ni.h5" --train 128 --val 64 --test 32 --time-bins 64 --seed 1 >/dev/null
cat > "$D/run.yaml" <<YAML
model: {name: neuron_inverter, options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32'}}
data: {format: neuron_inverter, path: '$D/ni.h5'}
train: {batch_size: 16}
stop: {max_epochs: 1}
runtime: {device: cpu}
YAML
NVTX_INJECTION64_PATH=$LIB MRMF_NVTX_LOG=$D/ranks%r \
  mpiexec -n 2 bash -c 'MRMF_NVTX_LOG=${MRMF_NVTX_LOG/\%r/$PMI_RANK} exec "$0" "$@"' \
  "$MRMF" train --config "$D/run.yaml" --out "$D/run" >"$D/log" 2>&1 || { cat "$D/log"; exit 1; }
fail=0
for r in 0 1; do
  f=$D/ranks$r
  [[ -s $f ]] || { echo "rank $r: no ranges recorded (was the recorder loaded?)"; fail=1; continue; }
  want=(data forward backward allreduce optimizer validation)
  ((r == 0)) && want+=(checkpoint)  # rank 0 writes the checkpoint
  for name in "${want[@]}"; do
    n=$(grep -cx "$name" "$f" || true)
    echo "rank $r: $name x$n"
    ((n > 0)) || fail=1
  done
done
# 128 samples / 2 ranks / batch 16 = 4 steps: one forward per step on each rank
# (validation's forwards are inside the 'validation' range, not 'forward').
for r in 0 1; do
  n=$(grep -cx forward "$D/ranks$r")
  ((n == 4)) || { echo "rank $r: $n forward ranges, expected 4"; fail=1; }
done
exit $fail
