#!/usr/bin/env bash
# Configures and builds mrmf. Uses the CUDA preset wherever nvcc is found
# (the CUDA backend is compiled and linked even without a GPU), the CPU
# preset otherwise. Prints the build directory on the last line of stdout;
# everything else (the dependency check, CMake's and the compiler's output)
# goes to stderr, so that a caller taking that line still shows the errors.
set -euo pipefail
exec 3>&1 1>&2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# MRMF_SKIP_DEPS=1: the dependencies come from elsewhere (modules, Spack,
# a non-Debian system); install_deps.sh needs apt.
[[ ${MRMF_SKIP_DEPS:-0} == 1 ]] || bash scripts/install_deps.sh

if [[ -z "${MRMF_PRESET:-}" ]]; then
  if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then MRMF_PRESET=cuda; else MRMF_PRESET=cpu; fi
fi
if [[ "$MRMF_PRESET" == cuda ]] && ! command -v nvcc >/dev/null 2>&1; then export PATH=/usr/local/cuda/bin:$PATH; fi
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
BUILD_DIR="build/$MRMF_PRESET"
# Configured unless the build files exist: a configure that failed (say, a
# library not yet installed) leaves a CMakeCache.txt but no build.ninja, and
# must run again once the cause is fixed. MRMF_CMAKE_ARGS always reconfigures.
if [[ ( ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ) || -n "${MRMF_CMAKE_ARGS:-}" ]]; then
  cmake --preset "$MRMF_PRESET" "${GEN[@]}" ${MRMF_CMAKE_ARGS:-} >"$ROOT/build-configure.log" 2>&1 || {
    cat "$ROOT/build-configure.log"; exit 1; }
fi
cmake --build "$BUILD_DIR" -j "${MRMF_JOBS:-$(nproc)}"
echo "$ROOT/$BUILD_DIR" >&3
