#!/usr/bin/env bash
# Installs mrmf's build and test dependencies from Debian packages.
# Idempotent and quiet when everything is already present: it only calls apt
# for the packages that dpkg does not report as installed.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  libhdf5-dev hdf5-tools          # data formats and checkpoints (serial HDF5: one I/O thread per rank)
  libdeflate-dev zlib1g-dev       # gzip-compressed HDF5 chunks: decoded on the loader's threads; written in tests
  mpich libmpich-dev              # launcher / control plane / CPU gradient averaging
  catch2                          # unit tests (Debian ships v2)
  libyaml-cpp-dev libcli11-dev    # configs and command lines
  libspdlog-dev libfmt-dev        # logging
  libdnnl-dev                     # oneDNN: CPU convolutions/GEMM (the CPU counterpart of cuDNN)
  libfftw3-dev                    # FFTs for the Gaussian-random-field generator
  nlohmann-json3-dev              # metrics.jsonl / summary.json
  python3-numpy python3-h5py      # tests: scripts/torch_state_dict.py (the HDF5 side of the PyTorch converter)
)
if [[ "${MRMF_WITH_TORCH:-0}" == "1" ]]; then PKGS+=(python3-torch); fi

# Not a Debian system (no dpkg-query): every package looked missing and the
# script failed inside apt-get or sudo with no word of what to do.
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "[mrmf] install_deps.sh needs dpkg and apt-get (Debian/Ubuntu). Elsewhere install the equivalents of:" >&2
  echo "[mrmf]   ${PKGS[*]}" >&2
  echo "[mrmf] and run with MRMF_SKIP_DEPS=1 (scripts/build.sh, test.sh and run_main.sh then skip this step)." >&2
  exit 1
fi
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then exit 0; fi

echo "[mrmf] installing: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "[mrmf] not root and no sudo: install ${missing[*]} as root, or set MRMF_SKIP_DEPS=1" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "[mrmf] dependencies installed"
