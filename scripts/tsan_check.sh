#!/usr/bin/env bash
# ThreadSanitizer run of the unit suite (CPU backend): the loaders' I/O and
# converter threads, the watchdog, the trainer's prefetch.
#
#   bash scripts/tsan_check.sh                 # every unit test (~30-40 min on 2 cores)
#   bash scripts/tsan_check.sh "[loader]"      # Catch2 test spec, e.g. one tag
#
# libgomp is not built with TSan, so every OpenMP parallel region looks like
# a race to it (tests run some regions on several threads on purpose:
# "deterministic whatever the thread count"). Those reports -- any report
# with an OpenMP frame -- are counted and set aside; the run fails on any
# other report (std::thread code), and the report is printed. A race between
# an OpenMP region and another thread would be set aside too: the ASan/UBSan
# preset (debug) and the repeated-run tests cover those paths as well.
# Also set aside: an exception object freed by the thread that drops the
# last exception_ptr to it, where another thread read its message before
# (a failed batch: the loader's thread keeps the error, next() rethrows it).
# The reference count that orders the two lives in libstdc++.so, which is
# not instrumented either. Only reports whose freeing stack goes through
# exception_ptr's release are set aside, counted as such.
#
# Environment the run needs here: UCX (MPICH's transport) hooks madvise(),
# which crashes TSan at thread exit -- UCX_MEM_EVENTS=no turns the hooks off.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A relative TSAN_LOG is the caller's (it landed under the repository root,
# after the cd below).
[[ -z ${TSAN_LOG:-} ]] || TSAN_LOG=$(realpath -m "$TSAN_LOG")
cd "$ROOT"
[[ ${MRMF_SKIP_DEPS:-0} == 1 ]] || bash scripts/install_deps.sh  # as build.sh
# Configured unless the build files exist (a failed configure leaves a
# CMakeCache.txt but no build.ninja; build.sh does the same).
if [[ ! -f build/tsan/build.ninja && ! -f build/tsan/Makefile ]]; then
  GEN=()
  if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
  cmake --preset tsan "${GEN[@]}" >build-configure-tsan.log 2>&1 || { cat build-configure-tsan.log; exit 1; }
fi
cmake --build build/tsan --target mrmf_unit_tests -j "${MRMF_JOBS:-$(nproc)}"

LOG="${TSAN_LOG:-build/tsan/tsan_unit.log}"
mkdir -p "$(dirname "$LOG")"
set +e
UCX_MEM_EVENTS=no OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE \
  TSAN_OPTIONS="halt_on_error=0 exitcode=0 second_deadlock_stack=1 history_size=4" \
  build/tsan/tests/mrmf_unit_tests "$@" >"$LOG" 2>&1
rc=$?
python3 - "$LOG" <<'PY'
import sys
text = open(sys.argv[1], errors="replace").read()
reports = [r.split("==================")[0] for r in text.split("WARNING: ThreadSanitizer")[1:]]
omp = [r for r in reports if "_omp_fn" in r or "GOMP_" in r or "libgomp" in r]
# The first stack (the access reported) frees through exception_ptr's release.
first = lambda r: r.split("Previous")[0]
eptr = [r for r in reports if r not in omp and "exception_ptr::_M_release" in first(r)
        and ("operator delete" in first(r) or "#0 free " in first(r))]
rest = [r for r in reports if r not in omp and r not in eptr]
print(f"tsan: {len(reports)} report(s); {len(omp)} inside OpenMP regions (libgomp is not instrumented; set aside); "
      f"{len(eptr)} an exception freed through exception_ptr's count (libstdc++.so, not instrumented; set aside); "
      f"{len(rest)} other")
for r in rest:
    print("WARNING: ThreadSanitizer" + r[:4000])
sys.exit(1 if rest else 0)
PY
py=$?
set -e
tail -n 3 "$LOG"
if ((rc != 0)); then echo "tsan: the unit tests failed (exit $rc); log: $LOG"; exit "$rc"; fi
exit "$py"
