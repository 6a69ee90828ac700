#!/usr/bin/env bash
# mrmf vs PyTorch, one full CPU training step per workload (forward, MSE,
# backward, Adam), 2 threads each. The two engines run back to back,
# alternating, for several rounds; the ratio mrmf/PyTorch samples/s is taken
# per round (pairing keeps it meaningful on a noisy, shared machine) and the
# median over rounds is reported, with both engines' median samples/s.
#
#   scripts/bench_vs_torch.sh [--build DIR] [--rounds R] [--steps N] [--warmup W]
#                             [--workloads "ni1600 ni800 cf32"] [--threads 2] [--out FILE] [--note TEXT]
#
# Needs: DIR/bin/bench_train_step (default build/h-perf, else build/cpu) and a
# python3 with torch (Debian: apt-get install -y python3-torch; /usr/bin/python3
# is preferred because pyenv shims may hide the system packages).
# Writes bench/results/cpu_train_step_<date>.md (machine, commit, date, table).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=""
ROUNDS=3
STEPS=10
WARMUP=3
THREADS=2
WORKLOADS="ni1600 ni800 cf32"
OUT=""
NOTE=""
while [[ $# -gt 0 ]]; do
  # Every option takes a value: a missing one is said by name (set -u's
  # "$2: unbound variable" was all a user got).
  case "$1" in
    --build | --rounds | --steps | --warmup | --threads | --workloads | --out | --note)
      [[ $# -ge 2 ]] || { echo "$1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --note) NOTE=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

# Counts checked before any work: 0 rounds ended in a Python traceback after
# the runs, a non-number in "unbound variable".
for v in ROUNDS STEPS THREADS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "--${v,,} must be a whole number >= 1, got '${!v}'" >&2; exit 2; }
done
[[ $WARMUP =~ ^[0-9]+$ ]] || { echo "--warmup must be a whole number >= 0, got '$WARMUP'" >&2; exit 2; }
[[ -n ${WORKLOADS// /} ]] || { echo "--workloads is empty" >&2; exit 2; }

if [[ -z "$BUILD" ]]; then
  for d in build/h-perf build/cpu build; do
    if [[ -x "$ROOT/$d/bin/bench_train_step" ]]; then BUILD="$ROOT/$d"; break; fi
  done
fi
MRMF_BIN="$BUILD/bin/bench_train_step"
[[ -x "$MRMF_BIN" ]] || { echo "bench_train_step not found (build first, or pass --build DIR)" >&2; exit 1; }
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
"$PY" -c "import torch" 2>/dev/null || { echo "$PY cannot import torch (apt-get install -y python3-torch)" >&2; exit 1; }

DATE=$(date -u +%Y-%m-%d)
[[ -n "$OUT" ]] || OUT="$ROOT/bench/results/cpu_train_step_${DATE}.md"
mkdir -p "$(dirname "$OUT")"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

export OMP_NUM_THREADS=$THREADS
for ((r = 1; r <= ROUNDS; ++r)); do
  for w in $WORKLOADS; do
    # Alternate which engine goes first, so neither always gets the cooler machine.
    if (( r % 2 )); then order="mrmf torch"; else order="torch mrmf"; fi
    for e in $order; do
      echo "round $r/$ROUNDS  $w  $e ..." >&2
      if [[ $e == mrmf ]]; then
        # Its stderr kept, and shown when it fails: with set -e a failing run
        # (a mistyped workload) ended the script with no word of why.
        "$MRMF_BIN" --workload "$w" --steps "$STEPS" --warmup "$WARMUP" --json 2>"$TMP/mrmf.err" > "$TMP/mrmf_${r}_${w}.json" ||
          { cat "$TMP/mrmf.err" >&2; echo "bench_vs_torch: $MRMF_BIN failed on workload $w" >&2; exit 1; }
      else
        "$PY" "$ROOT/bench/torch_train_step.py" --workload "$w" --steps "$STEPS" --warmup "$WARMUP" \
          --threads "$THREADS" --json > "$TMP/torch_${r}_${w}.json"
      fi
    done
  done
done

MACHINE=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
DIRTY=$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)
"$PY" - "$TMP" "$ROUNDS" "$WORKLOADS" "$OUT" "$MACHINE" "$COMMIT$DIRTY" "$DATE" "$THREADS" "$STEPS" "$WARMUP" "$NOTE" <<'EOF'
import json, statistics, sys
tmp, rounds, workloads, out, machine, commit, date, threads, steps, warmup, note = sys.argv[1:]
rounds = int(rounds)
rows = []
torch_ver = ""
for w in workloads.split():
    m, t, ratios, label = [], [], [], w
    for r in range(1, rounds + 1):
        a = json.load(open(f"{tmp}/mrmf_{r}_{w}.json"))["results"][0]
        tj = json.load(open(f"{tmp}/torch_{r}_{w}.json"))
        torch_ver = tj["engine"]
        b = tj["results"][0]
        label = a["label"]
        m.append(a["samples_per_s"]); t.append(b["samples_per_s"])
        ratios.append(a["samples_per_s"] / b["samples_per_s"])
    rows.append((label, statistics.median(m), 1e3 * a["batch"] / statistics.median(m), statistics.median(t),
                 1e3 * b["batch"] / statistics.median(t), statistics.median(ratios), min(ratios), max(ratios)))
lines = [f"# CPU training step: mrmf vs PyTorch ({date})", "",
         f"- machine: {machine} ({threads} threads per engine)",
         f"- commit: {commit}",
         f"- date: {date} (UTC)",
         f"- PyTorch: {torch_ver}; median of {steps} steps after {warmup} warm-up, {rounds} alternating rounds;"
         " ratio = mrmf / PyTorch samples/s, paired per round, median (min-max)",
         ]
if note:
    lines.append(f"- note: {note}")
lines += ["", "| workload | mrmf ms/step | mrmf samples/s | PyTorch ms/step | PyTorch samples/s | ratio |",
          "|---|---|---|---|---|---|"]
for label, ms, mms, ts, tms, rat, lo, hi in rows:
    lines.append(f"| {label} | {mms:.1f} | {ms:.1f} | {tms:.1f} | {ts:.1f} | {rat:.2f}x ({lo:.2f}-{hi:.2f}) |")
text = "\n".join(lines) + "\n"
print(text)
with open(out, "a") as f:
    f.write(text + "\n")
print(f"(appended to {out})", file=sys.stderr)
EOF
