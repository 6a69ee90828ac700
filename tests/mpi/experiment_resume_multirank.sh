#!/usr/bin/env bash
# `mrmf experiment --resume` on 3 ranks with the concurrent method (two rank
# groups, split 2 dense / 1 coarse or as probed): a rank killed part-way
# (MRMF_FAULT_EXIT, no MPI_Finalize) ends the job; --resume then continues
# from the stage checkpoints with the recorded split, and every number but
# the times equals an uninterrupted run's, stage by stage, with the same
# per-epoch losses in every stage's metrics.jsonl.
#   experiment_resume_multirank.sh MPIEXEC MRMF_BINARY
MPIEXEC=$1 MRMF=$2
source "$(dirname "$0")/cli_test_setup.sh"
cd "$DIR" || exit 1
"$MRMF" datagen neuron-inverter --out ni.h5 --train 768 --val 192 --test 64 --time-bins 64 --seed 3 >/dev/null \
  || fail "datagen"
cat > tiny.yaml <<'YAML'
model:
  name: neuron_inverter
  options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32'}
data: {format: neuron_inverter, path: 'ni.h5'}
train: {batch_size: 32, seed: 1}
optimizer: {name: adam, lr: 2.0e-3}
stop: {max_epochs: 2}
runtime: {device: cpu}
YAML
cat > exp.yaml <<'YAML'
base: tiny.yaml
experiment:
  methods: [concurrent]
  seeds: [1]
  target_val_loss: 0.001
  max_epochs: 2
  ladder: [[2], [1]]
  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 4}
  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 2}
  concurrent_times: [2.0, 1.0]
YAML
timeout 100 "$MPIEXEC" -n 3 "$MRMF" experiment --config exp.yaml --out ref > ref.log 2>&1 || { tail -20 ref.log; fail "reference run"; }
# Rank 2 (the coarse group, alone: 24 steps an epoch) dies at its stage's step 40, in epoch 1 of 4.
MRMF_FAULT_EXIT=2:40 timeout 100 "$MPIEXEC" -n 3 "$MRMF" experiment --config exp.yaml --out run > kill.log 2>&1
[[ $? -ne 0 ]] || fail "the killed run succeeded"
grep -q "MRMF_FAULT_EXIT: dying" kill.log || { tail -20 kill.log; fail "the fault was not injected"; }
timeout 100 "$MPIEXEC" -n 3 "$MRMF" experiment --config exp.yaml --out run --resume > resume.log 2>&1 \
  || { tail -20 resume.log; fail "--resume"; }
grep -q "concurrent split of the interrupted run kept" resume.log || { tail -20 resume.log; fail "split not kept"; }
grep -q "resumed from run/concurrent/seed1/stage1_coarse/checkpoint.h5 at epoch 1" resume.log \
  || { tail -20 resume.log; fail "the coarse stage did not continue from its epoch-1 checkpoint"; }
python3 - <<'PY' || fail "the resumed run differs from the uninterrupted one"
import json, glob, os
a = json.load(open("ref/summary.json"))["runs"][0]
b = json.load(open("run/summary.json"))["runs"][0]
for k in ["final_val_loss", "epochs_before_fusion", "epochs_after_fusion", "reached_target"]:
    assert a[k] == b[k], (k, a[k], b[k])
assert len(a["stages"]) == len(b["stages"]) == 3, (len(a["stages"]), len(b["stages"]))
for x, y in zip(a["stages"], b["stages"]):
    for k in ["name", "epochs", "final_val_loss", "stop_reason", "ranks"]:
        assert x[k] == y[k], (k, x[k], y[k])
stages = sorted(glob.glob("ref/concurrent/seed1/*/metrics.jsonl"))
assert [os.path.basename(os.path.dirname(m)) for m in stages] == ["finetune", "stage1_coarse", "stage1_dense"], stages
for m in stages:
    r = [(e["epoch"], e["train_loss"], e["val_loss"]) for e in map(json.loads, open(m))]
    s = [(e["epoch"], e["train_loss"], e["val_loss"]) for e in map(json.loads, open(m.replace("ref/", "run/", 1)))]
    assert r == s, (m, r, s)
assert not os.path.exists("run/concurrent/seed1/stage1_coarse/checkpoint.h5"), "pre-fusion checkpoint left"
PY
# SIGTERM that reaches rank 2 only (the coarse group): the coarse group
# stops with a checkpoint and tells the other group, which stops at its next
# step (signal at coarse step 10), or says that its stage had ended (step
# 70, epoch 2 of 4: the dense group's 2 epochs are done). Then SIGTERM to
# rank 0 only once its (dense) stage has ended and it waits for the coarse
# group, which no training step of rank 0 sees: rank 0 tells the coarse
# group, which stops at its next step. (Each group root's checkpoint takes
# 1 s longer there, so the coarse group's 4 epochs end 2 s after the dense
# group's 2.) The job ends in order within seconds each time (it used to wait
# two minutes for the group still training, and then abort), and --resume
# again equals the uninterrupted run.
for fault in MRMF_FAULT_SIGNAL=2:10 MRMF_FAULT_SIGNAL=2:70 MRMF_FAULT_SIGNAL_WAITING=0; do
  out=sig${fault#*=}
  t0=$SECONDS
  slow=0
  [[ $fault == *WAITING* ]] && slow=1000
  env "$fault" MRMF_FAULT_SLOW_SAVE_MS=$slow timeout 100 "$MPIEXEC" -n 3 "$MRMF" experiment --config exp.yaml --out "$out" >sig.log 2>&1
  rc=$? took=$((SECONDS - t0))
  [[ $rc -ne 0 && $rc -ne 124 ]] || { tail -20 sig.log; fail "$fault: exit $rc"; }
  ((took < 60)) || { tail -20 sig.log; fail "$fault: the job took $took s to end"; }
  if [[ $fault == *WAITING* ]]; then
    grep -q "dense group: its stage had finished when SIGTERM" sig.log &&
      grep -q "coarse@2: stopped by a stop signal to another rank" sig.log \
      || { tail -20 sig.log; fail "$fault: the stops are not said (did the coarse group train on?)"; }
  else
    grep -q "coarse@2: stopped by SIGTERM" sig.log || { tail -20 sig.log; fail "$fault: the coarse stop is not said"; }
    grep -Eq "dense@1: stopped by a stop signal to another rank|dense group: its stage had finished when a stop" sig.log \
      || { tail -20 sig.log; fail "$fault: the dense group's stop is not said"; }
  fi
  ! grep -q "MPI_Abort" sig.log || { tail -20 sig.log; fail "$fault: the job was aborted"; }
  timeout 100 "$MPIEXEC" -n 3 "$MRMF" experiment --config exp.yaml --out "$out" --resume >sig_resume.log 2>&1 \
    || { tail -20 sig_resume.log; fail "$fault: --resume"; }
  python3 - "$out" <<'PY' || fail "$fault: the resumed run differs from the uninterrupted one"
import json, sys
a = json.load(open("ref/summary.json"))["runs"][0]
b = json.load(open(sys.argv[1] + "/summary.json"))["runs"][0]
for k in ["final_val_loss", "epochs_before_fusion", "epochs_after_fusion"]:
    assert a[k] == b[k], (k, a[k], b[k])
PY
  echo "ok: $fault: ended in order in $took s, resumed to the uninterrupted result"
done
echo "PASS: a concurrent run killed on rank 2, or whose rank 2 alone got SIGTERM, resumed on 3 ranks equals an uninterrupted one"
