#!/usr/bin/env bash
# scripts/gpu_check.sh refuses a bad command line before doing anything: exit
# 2, the expected message, and no results folder made (it used to run the
# whole default check on a mistyped mode, spending a GPU session's minutes).
#   gpu_check_refuses.sh REPO_ROOT EXPECTED_MESSAGE [gpu_check.sh arguments...]
set -uo pipefail
ROOT=$1 WANT=$2
shift 2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT="$T/o" timeout 15 bash "$ROOT/scripts/gpu_check.sh" "$@" >"$T/log" 2>&1
rc=$?
cat "$T/log"
[[ $rc -eq 2 ]] || { echo "FAILED: exit $rc, expected 2"; exit 1; }
grep -qF -- "$WANT" "$T/log" || { echo "FAILED: no '$WANT' in the output"; exit 1; }
[[ ! -e $T/o ]] || { echo "FAILED: it made its results folder"; exit 1; }
echo "ok: refused with exit 2"
