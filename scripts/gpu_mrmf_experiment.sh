#!/usr/bin/env bash
# Issue 5's experiment in the paper's regime (configs/experiments/ni_gpu_scale.yaml,
# or cf_gpu_scale.yaml with MRMF_EXP=cf),
# run by `scripts/gpu_check.sh --mrmf` on a GPU machine, in pieces: it stops
# before MRMF_CALL_SECONDS (default 540) have passed, and the next call on the
# same machine continues it (`mrmf experiment --resume` over runs/gpu_mrmf).
# Each call copies the (partial) report, summary, chart and the
# time-to-target tables (targets set by the baseline's best validation loss)
# to OUT_DIR. MRMF_CALL_SECONDS must not exceed the device call's own limit
# (less than 600 s when the session's device time is running out).
#
#   scripts/gpu_mrmf_experiment.sh MRMF_BINARY OUT_DIR [extra mrmf experiment arguments]
#
# Extra arguments go to every call (a resumed experiment refuses changes);
# for a dry run on a CPU: --set runtime.device=cpu --set experiment.max_epochs=2 ...
# MRMF_EXP_DATA / MRMF_EXP_DIR / MRMF_EXP_CONFIG / MRMF_EXP_TRAIN /
# MRMF_EXP_SIZE override the data file (folder for cf), the experiment
# folder, the experiment file, the number of training samples generated and
# the CosmoFlow cube side.
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 MRMF_BINARY OUT_DIR [mrmf experiment arguments]" >&2; exit 2; }
# Absolute before the cd below: relative paths are the caller's.
MRMF=$1
[[ $MRMF == */* ]] && MRMF=$(realpath -m "$MRMF")  # a bare name is looked up on PATH
OUT_DIR=$(realpath -m "$2")
shift 2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# MRMF_EXP picks the application: ni (Neuron Inverter, the default) or cf
# (CosmoFlow 128^3, configs/experiments/cf_gpu_scale.yaml).
case ${MRMF_EXP:-ni} in
  ni)
    D=${MRMF_EXP_DATA:-runs/data/ni64k.h5}
    X=${MRMF_EXP_DIR:-runs/gpu_mrmf}
    CONFIG=${MRMF_EXP_CONFIG:-configs/experiments/ni_gpu_scale.yaml}
    GEN=(neuron-inverter --train "${MRMF_EXP_TRAIN:-65536}" --val 4096 --test 2048 --seed 1) ;;
  cf)
    D=${MRMF_EXP_DATA:-runs/data/cf128}
    X=${MRMF_EXP_DIR:-runs/gpu_mrmf_cf}
    CONFIG=${MRMF_EXP_CONFIG:-configs/experiments/cf_gpu_scale.yaml}
    GEN=(cosmoflow --size "${MRMF_EXP_SIZE:-128}" --train "${MRMF_EXP_TRAIN:-1024}" --val 128 --test 128 --seed 1) ;;
  *) echo "MRMF_EXP must be ni or cf, got '${MRMF_EXP}'" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$D")" "$OUT_DIR"
if [[ ! -e $D ]]; then
  # Written beside its final name and renamed when whole: a call killed at
  # the device's limit in the middle of datagen (~75 s for 1280 cubes of
  # 128³) leaves no partial data set that the next call would take as done.
  rm -rf "$D.partial"
  "$MRMF" datagen "${GEN[@]}" --out "$D.partial" | tail -1
  [[ ${PIPESTATUS[0]} == 0 ]] || { rm -rf "$D.partial"; exit 1; }
  mv "$D.partial" "$D"
fi
# What the experiment has so far, copied to OUT_DIR (also first: a call that
# the device kills at its limit still returns the previous call's results).
collect() {
  for f in report.md summary.json chart.svg experiment_state.json; do
    [[ -f $X/$f ]] && cp "$X/$f" "$OUT_DIR/"
  done
  # Every stage's per-epoch metrics (io / compute / validation per epoch:
  # the report keeps only their means), in one file.
  (cd "$X" && find . -name metrics.jsonl -print0 | tar czf "$OUT_DIR/metrics.tgz" --null -T -) 2>/dev/null
  if [[ -f $X/summary.json ]] && grep -q '"method": *"baseline"' "$X/summary.json"; then
    # Targets above the baseline's mean best loss: at 1.00 some seed never gets there by construction.
    python3 scripts/time_to_target.py "$X" --relative 1.10 1.05 1.03 1.01 --out "$OUT_DIR/time_to_target.md" || true
  fi
}
collect >/dev/null
RESUME=()
[[ -f $X/experiment_state.json ]] && RESUME=(--resume)
LEFT=$((${MRMF_CALL_SECONDS:-540} - SECONDS - 20)) # 20 s for the tables and copies below
if ((LEFT > 30)); then
  # The per-epoch lines stay in the runs' metrics.jsonl; the log keeps the rest.
  HDF5_USE_FILE_LOCKING=FALSE timeout "$LEFT" "$MRMF" experiment --config "$CONFIG" \
    --out "$X" "${RESUME[@]}" --set data.path="$D" "$@" 2>&1 | grep -vE "\] [^ ]+ epoch +[0-9]+ +train" | tail -40
  code=${PIPESTATUS[0]}
  case $code in
    0) echo "experiment finished" ;;
    124) echo "experiment stopped at this call's time limit: run the same command again to continue it" ;;
    *) echo "experiment failed (exit $code)" ;;
  esac
else
  echo "no time left in this call for the experiment (${LEFT} s): run the same command again"
  code=124
fi
collect
# Which targets each method gained or lost on (docs/results_mrmf.md,
# session 28): one `mrmf eval` per finished run, a few seconds each on the
# GPU -- within what is left of the call, so that the device call's own
# limit never cuts off what the caller collects after this script.
EVAL_LEFT=$((${MRMF_CALL_SECONDS:-540} - SECONDS - 5))
if [[ $code == 0 ]] && ((EVAL_LEFT > 10)); then
  timeout "$EVAL_LEFT" python3 scripts/per_target_mse.py "$X" --data "$D" --mrmf "$MRMF" >"$OUT_DIR/per_target_mse.md" 2>&1 ||
    echo "per_target_mse.py failed or ran out of time (see $OUT_DIR/per_target_mse.md)"
  cat "$OUT_DIR/per_target_mse.md"
elif [[ $code == 0 ]]; then
  echo "no time left in this call for per_target_mse.py (${EVAL_LEFT} s)"
fi
# 0: finished; 124: to be continued by the next call (not a failure); else the experiment's error.
exit "$code"
