#!/usr/bin/env bash
# The test command: installs dependencies, builds (CUDA backend included
# wherever nvcc exists) and runs the whole CTest suite -- unit, mpi, and gpu
# (reported as skipped where no GPU exists).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(bash "$ROOT/scripts/build.sh" | tail -n 1)"
cd "$BUILD_DIR"
# HDF5 file locking fails on some shared file systems and is unneeded for read-only opens.
export HDF5_USE_FILE_LOCKING=FALSE
ctest --output-on-failure -j "${MRMF_TEST_JOBS:-2}" "$@"
