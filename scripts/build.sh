#!/usr/bin/env bash
# Configures and builds mrmf. Uses the CUDA preset wherever nvcc is found
# (the CUDA backend is compiled and linked even without a GPU), the CPU
# preset otherwise. Prints the build directory on the last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/install_deps.sh

if [[ -z "${MRMF_PRESET:-}" ]]; then
  if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then MRMF_PRESET=cuda; else MRMF_PRESET=cpu; fi
fi
if [[ "$MRMF_PRESET" == cuda ]] && ! command -v nvcc >/dev/null 2>&1; then export PATH=/usr/local/cuda/bin:$PATH; fi
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
BUILD_DIR="build/$MRMF_PRESET"
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake --preset "$MRMF_PRESET" "${GEN[@]}" ${MRMF_CMAKE_ARGS:-} >"$ROOT/build-configure.log" 2>&1 || {
    cat "$ROOT/build-configure.log"; exit 1; }
fi
cmake --build "$BUILD_DIR" -j "${MRMF_JOBS:-$(nproc)}"
echo "$ROOT/$BUILD_DIR"
