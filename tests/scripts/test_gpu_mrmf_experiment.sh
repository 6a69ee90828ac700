#!/usr/bin/env bash
# scripts/gpu_mrmf_experiment.sh, the piece of every GPU session's one long
# device call that runs issue 5's experiment, on a tiny CPU experiment: a
# mistake in it costs a session's scarce device minutes, so its contract is
# checked here.
#  - no time left in the call: exit 124 ("run the same command again"), nothing run;
#  - a run to the end: exit 0, the report, summary, time-to-target table and
#    per-target table copied to OUT_DIR, a row per method in the last;
#  - the same command again: the experiment resumes (every run kept), exit 0;
#  - an experiment that fails: its exit status, not 0 or 124.
#   test_gpu_mrmf_experiment.sh MRMF_BINARY REPO_ROOT
set -uo pipefail
MRMF=$1 ROOT=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export OMP_NUM_THREADS=1 MRMF_DEVICE=cpu HDF5_USE_FILE_LOCKING=FALSE
fail() { echo "FAILED: $*"; exit 1; }
"$MRMF" datagen neuron-inverter --out "$D/ni.h5" --train 128 --val 64 --test 16 --time-bins 64 --seed 3 >/dev/null ||
  fail "datagen"
cat >"$D/tiny.yaml" <<YAML
model: {name: neuron_inverter, options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32'}}
data: {format: neuron_inverter, path: '$D/ni.h5'}
train: {batch_size: 32, seed: 1}
optimizer: {name: adam, lr: 2.0e-3}
stop: {max_epochs: 2}
runtime: {device: cpu}
YAML
cat >"$D/exp.yaml" <<YAML
base: tiny.yaml
experiment:
  methods: [baseline, mrt]
  seeds: [1]
  target_val_loss: 0.001
  max_epochs: 1
  ladder: [[2], [1]]
  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}
YAML
export MRMF_EXP=ni MRMF_EXP_DATA=$D/ni.h5 MRMF_EXP_DIR=$D/exp MRMF_EXP_CONFIG=$D/exp.yaml
run() { bash "$ROOT/scripts/gpu_mrmf_experiment.sh" "$MRMF" "$D/out" --threads 1 "$@" >"$D/log" 2>&1; }

MRMF_CALL_SECONDS=40 run
code=$?
[[ $code == 124 ]] || fail "no time left: exit $code, expected 124 ($(cat "$D/log"))"
grep -q "no time left in this call" "$D/log" || fail "no time left: message ($(cat "$D/log"))"
[[ ! -e $D/exp/experiment_state.json ]] || fail "no time left: the experiment was started anyway"

MRMF_CALL_SECONDS=300 run
code=$?
[[ $code == 0 ]] || fail "a whole run: exit $code ($(cat "$D/log"))"
for f in report.md summary.json experiment_state.json metrics.tgz time_to_target.md per_target_mse.md; do
  [[ -s $D/out/$f ]] || fail "a whole run: $f not in OUT_DIR ($(ls "$D/out"))"
done
for m in baseline mrt; do
  grep -q "^| $m | 1 |" "$D/out/per_target_mse.md" || fail "per_target_mse.md has no row for $m ($(cat "$D/out/per_target_mse.md"))"
done
grep -q "experiment finished" "$D/log" || fail "a whole run: message ($(cat "$D/log"))"

rm "$D/out/per_target_mse.md"
MRMF_CALL_SECONDS=300 run
code=$?
[[ $code == 0 ]] || fail "the same command again: exit $code ($(cat "$D/log"))"
grep -q "finished earlier" "$D/log" || fail "the same command again did not resume ($(cat "$D/log"))"
[[ -s $D/out/per_target_mse.md ]] || fail "the same command again: no per-target table"

MRMF_EXP_DIR=$D/exp2 MRMF_CALL_SECONDS=300 run --set optimizer.lr=not-a-number
code=$?
[[ $code != 0 && $code != 124 ]] || fail "a failing experiment: exit $code ($(cat "$D/log"))"
grep -q "experiment failed (exit $code)" "$D/log" || fail "a failing experiment: message ($(cat "$D/log"))"
echo "gpu_mrmf_experiment.sh: all checks passed"
