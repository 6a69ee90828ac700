#!/usr/bin/env bash
# Downloads (does not install) the Debian packages mrmf builds against into
# .gpudeps/, for a GPU machine that has no package registry. Only the
# libraries themselves and their headers: the base system libraries (libc,
# libstdc++) are taken from the machine; the runtime libraries MPICH and
# oneDNN load (UCX, gfortran, OpenCL loader) are fetched as well.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$ROOT/.gpudeps" && cd "$ROOT/.gpudeps"
# The exclude file git itself reads: in a worktree (or submodule) .git is a
# file, and `mkdir .git/info` stopped the script before any download.
if EXCLUDE=$(git -C "$ROOT" rev-parse --git-path info/exclude 2>/dev/null); then
  [[ $EXCLUDE == /* ]] || EXCLUDE="$ROOT/$EXCLUDE"  # relative to ROOT in a plain checkout
  mkdir -p "$(dirname "$EXCLUDE")"
  grep -qx '/.gpudeps/' "$EXCLUDE" 2>/dev/null || echo '/.gpudeps/' >> "$EXCLUDE"
fi
apt-get download libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libsz2 libaec0 zlib1g-dev libdeflate-dev libdeflate0 \
  libmpich-dev libmpich12 mpich hwloc-nox libhwloc15 \
  libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
  libdnnl-dev libdnnl2 libfftw3-dev libfftw3-single3 nlohmann-json3-dev catch2 \
  pkgconf pkgconf-bin libpkgconf3 \
  libucx0 libibverbs1 librdmacm1 libnuma1 libgfortran5 libquadmath0 ocl-icd-libopencl1 libslurm38 2>&1 | tail -2
du -sh .
