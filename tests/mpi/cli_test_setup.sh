# Sourced by the multi-rank CLI tests (tests/mpi/*.sh) after they set MPIEXEC
# and MRMF: strict mode, a scratch folder $DIR removed at exit, the CPU
# backend with one thread per rank, HDF5 readable by many ranks, and fail().
set -uo pipefail
DIR=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$DIR"' EXIT
export OMP_NUM_THREADS=1 MRMF_DEVICE=cpu HDF5_USE_FILE_LOCKING=FALSE
fail() { echo "FAIL: $*"; exit 1; }
