#!/usr/bin/env bash
# The main job: a small end-to-end MRMF experiment on synthetic Neuron
# Inverter data, on the CPU, in a few minutes on 2 cores. Installs and builds
# what it needs, generates the data (once), runs baseline, MRT, MRMF with one
# and two fusions to the same target validation loss, and prints the table.
# Results: runs/main/{report.md,chart.svg,summary.json} and per-run metrics.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(bash "$ROOT/scripts/build.sh" | tail -n 1)"
MRMF="$BUILD_DIR/bin/mrmf"
cd "$ROOT"
mkdir -p runs/data
if [[ ! -f runs/data/ni_main.h5 ]]; then
  "$MRMF" datagen neuron-inverter --out runs/data/ni_main.h5 --train 2048 --val 512 --test 512 --seed 1
fi
export HDF5_USE_FILE_LOCKING=FALSE
# --force: running the main job again replaces its previous report in runs/main.
exec "$MRMF" experiment --config configs/experiments/ni_small.yaml --out runs/main --force \
  --set data.path=runs/data/ni_main.h5 "$@"
