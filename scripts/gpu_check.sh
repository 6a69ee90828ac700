#!/usr/bin/env bash
# The whole GPU check in one call, for a machine with an NVIDIA GPU:
#  1. builds the CUDA backend (sm_90 by default; MRMF_CUDA_ARCH overrides),
#  2. runs the gpu-labelled tests (CUDA vs CPU for every op and layer),
#  3. trains Neuron Inverter end to end on the GPU (loader -> cuDNN/cuBLAS ->
#     NCCL on one rank -> checkpoint), then evaluates the checkpoint,
#  4. runs the benchmarks (kernels vs device copy, conv, optimizer, data, and
#     the training step against PyTorch on the same GPU, CosmoFlow 128^3 peak
#     memory included),
# and writes the results with device, commit and date to $OUT (or
# bench/results/gpu_<date>/). Unit and MPI tests run on the CPU in CI.
#
# The GPU machine may have no package registry: run `scripts/fetch_gpu_deps.sh`
# here first, which downloads the Debian packages mrmf builds against into
# .gpudeps/ (ignored by git); carry that folder along. They are unpacked into
# a private prefix, never over /.
#
#   scripts/gpu_check.sh [MODE ...]   (none: the whole check)
# Several modes run one after the other over one build and one run of the gpu
# tests, e.g. `--data --profile --mrmf`: a device call costs a machine start
# and a build, so one call should do everything it can.
#     --quick:   gpu tests and the training step only
#     --data:    gpu tests, bench_data, bench_kernels and --overlap-ab's trainings
#                (issue 3's GPU numbers, ~3 min after the build)
#     --all-mrmf: the whole check, then --mrmf for what is left of the call
#     --run:     after the build, `bash -c "$MRMF_GPU_CMD"` with the built tree's
#                environment ($B: the build folder) -- a prepared one-off
#                measurement without a mode of its own
#     --overlap-ab: gpu tests, then Neuron Inverter training with the batch copy
#                waited for in next() against the copy from the I/O thread
#     --profile: build, then a per-kernel GPU time profile of the training step
#                (Nsight Systems, or Nsight Compute where nsys is missing) for
#                MRMF_PROFILE_WORKLOADS; MRMF_PROFILE_WORKSPACE=0 skips the
#                cf128 cuDNN workspace-cap sweep before it
#     --mrmf:    build, then issue 5's experiment in the paper's regime
#                (configs/experiments/ni_gpu_scale.yaml: ~100-epoch baselines,
#                out of reach of the CPU VM). Resumable: it stops before the
#                call's time limit (MRMF_CALL_SECONDS, default 570, counted from
#                the script's start) and the next --mrmf call on the same warm
#                machine continues it (runs/gpu_mrmf, experiment --resume).
#                Report, summary and time-to-target tables go to $OUT.
#                MRMF_EXP=cf: CosmoFlow 128^3 instead (configs/experiments/
#                cf_gpu_scale.yaml, ~3 min per run); see gpu_mrmf_experiment.sh
#                for the other overrides; MRMF_EXP_ARGS adds arguments to
#                every `mrmf experiment` call (e.g. --set ...). The
#                experiment folder (stage checkpoints) lives on that machine
#                only: issue the next call before it is released.
set -uo pipefail
export HDF5_USE_FILE_LOCKING=FALSE
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A relative $OUT is the caller's, as in gpu_mrmf_experiment.sh (it landed
# under the repository root, after the cd below).
[[ -z ${OUT:-} ]] || OUT=$(realpath -m "$OUT")
cd "$ROOT"
MODES=("$@")
((${#MODES[@]})) || MODES=(all)
for MODE in "${MODES[@]}"; do
  case $MODE in
    all | --quick | --data | --profile | --mrmf | --all-mrmf | --overlap-ab | --run) ;;
    *) echo "gpu_check.sh: unknown mode '$MODE' (expected --quick, --data, --profile, --mrmf, --all-mrmf, --overlap-ab, --run or none)" >&2
       exit 2 ;;
  esac
  [[ $MODE == --run && -z ${MRMF_GPU_CMD:-} ]] && { echo "gpu_check.sh: --run needs MRMF_GPU_CMD (the command to run)" >&2; exit 2; }
done
OUT_DIR="${OUT:-$ROOT/bench/results/gpu_$(date -u +%F)}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
exec > >(tee "$LOG") 2>&1
stage() { echo; echo "== $* ($(date -u +%T))"; }

PREFIX=/tmp/mrmf-deps
if compgen -G ".gpudeps/*.deb" >/dev/null; then
  mkdir -p "$PREFIX"
  for f in .gpudeps/*.deb; do dpkg -x "$f" "$PREFIX"; done
  U="$PREFIX/usr"
  # Debian's MPICH wrappers and pkg-config files name /usr; point them at the prefix.
  for w in mpicc mpicxx; do
    sed -e "s|=/usr|=$U|g" -e "s| -L/usr/lib| -L$U/lib|g" -e "s|sysconfdir=/etc/mpich|sysconfdir=$PREFIX/etc/mpich|" \
      "$U/bin/$w.mpich" >"$U/bin/$w"
    chmod +x "$U/bin/$w"
  done
  ln -sf mpiexec.hydra "$U/bin/mpiexec"
  for pc in "$U"/lib/x86_64-linux-gnu/pkgconfig/*.pc "$U"/share/pkgconfig/*.pc; do
    [[ -f "$pc" ]] && sed -i "s|^prefix=/usr|prefix=$U|" "$pc"
  done
  export CMAKE_PREFIX_PATH="$U:$U/lib/x86_64-linux-gnu/cmake:${CMAKE_PREFIX_PATH:-}"
  export LD_LIBRARY_PATH="$U/lib/x86_64-linux-gnu:$U/lib/x86_64-linux-gnu/hdf5/serial:${LD_LIBRARY_PATH:-}"
  export PATH="$U/bin:$PATH"
  export PKG_CONFIG_PATH="$U/lib/x86_64-linux-gnu/pkgconfig:$U/share/pkgconfig"
  export HDF5_ROOT="$U"
  export DNNL_ROOT="$U"
  EXTRA=(-DMPI_C_COMPILER="$U/bin/mpicc" -DMPI_CXX_COMPILER="$U/bin/mpicxx"
    -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON -DHDF5_C_INCLUDE_DIR="$U/include/hdf5/serial"
    -DHDF5_hdf5_LIBRARY_RELEASE="$U/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so")
else
  EXTRA=()
fi
# cuDNN and NCCL from the CUDA image's Python wheels when the toolkit lacks them.
for pkg in cudnn nccl; do
  d=$(python3 -c "import nvidia.$pkg, os; print(os.path.dirname(nvidia.$pkg.__file__) if nvidia.$pkg.__file__ else list(nvidia.$pkg.__path__)[0])" 2>/dev/null || true)
  if [[ -n "$d" && -d "$d/lib" ]]; then
    upper=$(echo "$pkg" | tr a-z A-Z)
    export "${upper}_ROOT=$d"
    export LD_LIBRARY_PATH="$d/lib:${LD_LIBRARY_PATH:-}"
    for so in "$d"/lib/lib${pkg}.so.*; do [[ -e "$d/lib/lib${pkg}.so" ]] || ln -sf "$(basename "$so")" "$d/lib/lib${pkg}.so"; done
  fi
done

stage device
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%FT%TZ)"
nvcc --version | tail -2
ARCH="${MRMF_CUDA_ARCH:-90}"
B=build/gpu
stage configure
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMRMF_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  "${EXTRA[@]}" >"$OUT_DIR/configure.txt" 2>&1 || { tail -40 "$OUT_DIR/configure.txt"; exit 1; }
grep "mrmf:" "$OUT_DIR/configure.txt"
stage build
cmake --build $B -j "$(nproc)" >"$OUT_DIR/build.txt" 2>&1 || { grep -B2 -A12 "error" "$OUT_DIR/build.txt" | head -80; exit 1; }
rm -f "$OUT_DIR/build.txt" "$OUT_DIR/configure.txt"
$B/bin/mrmf info

run_mrmf() {
  stage "MRMF experiment on the GPU (MRMF_EXP=${MRMF_EXP:-ni}, ${MRMF_EXP_CONFIG:-its default experiment file})"
  # MRMF_EXP_ARGS is split on blanks: arguments without spaces inside them.
  # shellcheck disable=SC2086
  MRMF_CALL_SECONDS=$((${MRMF_CALL_SECONDS:-570} - SECONDS)) bash scripts/gpu_mrmf_experiment.sh "$B/bin/mrmf" \
    "$OUT_DIR/mrmf_${MRMF_EXP:-ni}" ${MRMF_EXP_ARGS:-}
  local code=$?
  # 124: stopped at this call's time limit, continued by the next call.
  [[ $code == 0 || $code == 124 ]] || fail "the MRMF experiment (exit $code)"
  stage "done (mrmf): results in $OUT_DIR/mrmf_${MRMF_EXP:-ni}"
}
GPU_TESTS_RAN=0
FAILED=()
fail() { FAILED+=("$1"); echo "gpu_check.sh: FAILED: $1" >&2; }
run_gpu_tests() {
  # Once per invocation, first (a few seconds): code written since the last
  # GPU session runs there before anything else relies on it.
  ((GPU_TESTS_RAN)) && return
  GPU_TESTS_RAN=1
  stage "gpu tests"
  (cd $B && timeout 180 ctest -L gpu --output-on-failure) >"$OUT_DIR/gpu_tests.txt" 2>&1 || fail "gpu tests"
  grep -E "assertions|test cases|passed|failed|FAILED|Error|error" "$OUT_DIR/gpu_tests.txt" | head -60
}

overlap_ab() {
  # The batch's host-to-device copy waited for in next() (0) or made by the
  # I/O thread, overlapping the steps before it (1; data/loader.h
  # overlap_h2d), alternated twice on the same data: compare io and epoch.
  stage "batch copy in next() vs from the I/O thread (MRMF_OVERLAP_H2D)"
  E=/tmp/mrmf-ab
  mkdir -p $E
  [[ -f $E/ni.h5 ]] || $B/bin/mrmf datagen neuron-inverter --out $E/ni.h5 --train 32768 --val 2048 --test 512 --seed 1 | tail -1
  for ov in 0 1 0 1; do
    echo "-- MRMF_OVERLAP_H2D=$ov"
    MRMF_OVERLAP_H2D=$ov timeout 120 $B/bin/mrmf train --config configs/neuron_inverter_gpu.yaml --out $E/run$ov --force \
      --set data.path=$E/ni.h5 --set stop.max_epochs=4 2>&1 | grep -E "epoch +[0-9]|error|MRMF_OVERLAP"
  done
}

# Issue 3's GPU numbers in one go: bench_data (fused downsample kernels
# against a device copy, the loader -> GPU rows), the element-wise kernels,
# and the overlapped batch copy.
run_data() {
  stage "bench_data"
  timeout 150 $B/bin/bench_data 2>&1
  stage "bench_kernels"
  timeout 60 $B/bin/bench_kernels 2>&1
  overlap_ab
  stage "done (data)"
}

run_profile() {
  stage "profile of the training step"
  if [[ ${MRMF_PROFILE_WORKSPACE:-1} != 0 ]]; then
    for ws in 256 1024 4096 16384; do
      echo "cuDNN workspace cap $ws MB:"
      timeout 60 $B/bin/bench_train_step --workload cf128 --steps 5 --warmup 2 --device cuda --workspace-mb $ws | tail -1
    done
  fi
  # Neuron Inverter at T = 1600 and 800 too: its step runs only 1.42x faster at
  # half the length (session 13), which caps MRMF's saving on one GPU.
  # MRMF_PROFILE_WORKLOADS picks others (each profile may take minutes).
  for w in ${MRMF_PROFILE_WORKLOADS:-cf128 ni1600 ni800}; do
    if command -v nsys >/dev/null; then
      timeout 200 nsys profile -o /tmp/prof_$w --force-overwrite true -t cuda,nvtx \
        $B/bin/bench_train_step --workload $w --steps 3 --warmup 2 --device cuda >/dev/null 2>&1
      nsys stats -q -r cuda_gpu_kern_sum -f csv /tmp/prof_$w.nsys-rep 2>/dev/null | head -40 >"$OUT_DIR/profile_$w.csv"
    else
      # Only the timed step: the warm-up steps hold cuDNN's algorithm search.
      timeout 200 ncu --nvtx --nvtx-include "timed_step/" --metrics gpu__time_duration.sum --csv \
        $B/bin/bench_train_step --workload $w --steps 1 --warmup 2 --device cuda >/tmp/ncu_$w.csv 2>/dev/null
      python3 - /tmp/ncu_$w.csv >"$OUT_DIR/profile_$w.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr, tot, cnt = rows[0], collections.Counter(), collections.Counter()
for r in rows[1:]:
    d = dict(zip(hdr, r))
    if d.get("Metric Name") == "gpu__time_duration.sum":
        k = d["Kernel Name"][:110]; tot[k] += float(d["Metric Value"].replace(",", "")); cnt[k] += 1
print("total_ns,calls,kernel")
for k, v in tot.most_common(40): print(f"{v:.0f},{cnt[k]},{k}")
PY
    fi
    head -30 "$OUT_DIR/profile_$w.csv" | cut -c1-250
  done
  stage "done (profile)"
}

train_step_vs_torch() {
  stage "training step vs PyTorch on the same GPU"
  WL=(--workload ni1600 --workload ni800 --workload cf32 --workload cf64 --workload cf128)
  # Defaults of both (TF32 convolutions, timed algorithm search), then strict FP32.
  {
    timeout 100 $B/bin/bench_train_step "${WL[@]}" --steps 20 --warmup 5 --device cuda --json
    timeout 100 python3 bench/torch_train_step.py "${WL[@]}" --steps 20 --warmup 5 --device cuda --json
    timeout 100 $B/bin/bench_train_step "${WL[@]}" --steps 20 --warmup 5 --device cuda --tf32 0 --json
    timeout 100 python3 bench/torch_train_step.py "${WL[@]}" --steps 20 --warmup 5 --device cuda --no-tf32 --json
  } >"$OUT_DIR/train_step.json"
  python3 - "$OUT_DIR/train_step.json" <<'PY'
import json, sys
txt = open(sys.argv[1]).read()
dec, runs, i = json.JSONDecoder(), [], 0
while i < len(txt):
    if txt[i] in " \n\t": i += 1; continue
    try:
        obj, i = dec.raw_decode(txt, i); runs.append(obj)
    except ValueError:  # a run cut off by its timeout: what came before still counts
        print(f"(output cut short at character {i}: a run timed out or failed)"); break
# Paired by engine and TF32 setting, not by position: a run that failed or
# timed out (no torch on the machine) wrote nothing, and pairing by position
# then set mrmf's TF32 run against mrmf's strict one under "torch".
by = {(str(r.get("engine", "")).split()[0], bool(r.get("tf32"))): r for r in runs}
missing = [f"{e} tf32={t}" for t in (True, False) for e in ("mrmf", "pytorch") if (e, t) not in by]
if missing: print("no result from: " + ", ".join(missing))
print(f"{'workload':<40} {'tf32':>5} {'mrmf samples/s':>15} {'torch samples/s':>16} {'ratio':>6} {'mrmf GB':>8} {'torch GB':>8}")
for a, b in ((by[("mrmf", t)], by[("pytorch", t)]) for t in (True, False) if ("mrmf", t) in by and ("pytorch", t) in by):
    tb = {r["workload"]: r for r in b["results"]}
    for r in a["results"]:
        t = tb.get(r["workload"])
        if t: print(f"{r['label']:<40} {a['tf32']:>5} {r['samples_per_s']:>15.1f} {t['samples_per_s']:>16.1f} "
                    f"{r['samples_per_s'] / t['samples_per_s']:>6.2f} {r['peak_gpu_gb']:>8.2f} {t['peak_gpu_gb']:>8.2f}")
PY
}

run_full() {
  train_step_vs_torch
  [[ $1 == --quick ]] && { stage "done (quick)"; return; }

  stage "end-to-end training on the GPU"
  E=/tmp/mrmf-e2e
  mkdir -p $E
  $B/bin/mrmf datagen neuron-inverter --out $E/ni.h5 --train 4096 --val 512 --test 512 --seed 1 | tail -2
  timeout 180 $B/bin/mrmf train --config configs/neuron_inverter_cpu.yaml --out $E/run --force --set data.path=$E/ni.h5 \
    --device cuda --set runtime.device=cuda --set stop.max_epochs=4 || fail "end-to-end training"
  cat $E/run/metrics.jsonl 2>/dev/null | head -5
  $B/bin/mrmf eval --checkpoint $E/run/checkpoint.h5 --data $E/ni.h5 --split test --device cuda || fail "eval"

  stage benchmarks
  # bench_data at full size: the fused downsample kernel on 128^3 CosmoFlow batches.
  for b in "bench_kernels" "bench_optim 20 cuda" "bench_conv" "bench_data"; do
    set -- $b
    [[ -x $B/bin/$1 ]] || continue
    echo "-- $b"
    timeout 150 $B/bin/$b 2>&1
  done
  echo "-- mrmf bench --device cuda"
  timeout 60 $B/bin/mrmf bench --device cuda --workload ni1600 cf32 --steps 5
  stage "done: results in $OUT_DIR"
}

for MODE in "${MODES[@]}"; do
  case $MODE in
    --profile) run_profile ;; # the profile needs no test run before it
    --mrmf) run_gpu_tests; run_mrmf ;;
    --overlap-ab) run_gpu_tests; overlap_ab; stage "done (overlap-ab)" ;;
    --data) run_gpu_tests; run_data ;;
    --quick | all) run_gpu_tests; run_full "$MODE" ;;
    --all-mrmf) run_gpu_tests; run_full all; run_mrmf ;;
    --run) stage "MRMF_GPU_CMD"; B=$B bash -c "$MRMF_GPU_CMD" || fail "MRMF_GPU_CMD"; stage "done (run)" ;;
  esac
done
# Benchmarks report numbers, not verdicts; tests, the end-to-end run and the
# experiment decide the exit status (the output keeps going past a failure).
((${#FAILED[@]} == 0)) || { echo "gpu_check.sh: FAILED: ${FAILED[*]}" >&2; exit 1; }
