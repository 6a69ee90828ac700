#!/usr/bin/env bash
# Downloads (does not install) the Debian packages mrmf builds against into
# .gpudeps/, for a GPU machine that has no package registry. Only the
# libraries themselves and their headers: the base system libraries (libc,
# libstdc++) are taken from the machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$ROOT/.gpudeps" && cd "$ROOT/.gpudeps"
grep -qx '/.gpudeps/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.gpudeps/' >> "$ROOT/.git/info/exclude"
apt-get download libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libsz2 libaec0 \
  libmpich-dev libmpich12 mpich hwloc-nox libhwloc15 \
  libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
  libdnnl-dev libdnnl2 libfftw3-dev libfftw3-single3 nlohmann-json3-dev catch2 2>&1 | tail -2
du -sh .
