#!/usr/bin/env bash
# The whole GPU check in one call, for a machine with an NVIDIA GPU:
# builds the CUDA backend, runs the gpu-labelled tests (CUDA vs CPU for every
# op and layer) and the unit suite, then the benchmarks, and writes the
# results with device, commit and date to $OUT (or bench/results/).
#
# The GPU machine may have no package registry: run `scripts/fetch_gpu_deps.sh`
# here first, which downloads the Debian packages mrmf builds against into
# .gpudeps/ (ignored by git); carry that folder along. They are unpacked into
# a private prefix, never over /.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT_DIR="${OUT:-$ROOT/bench/results}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"
exec > >(tee "$LOG") 2>&1

PREFIX=/tmp/mrmf-deps
if compgen -G ".gpudeps/*.deb" >/dev/null; then
  mkdir -p "$PREFIX"
  for f in .gpudeps/*.deb; do dpkg -x "$f" "$PREFIX"; done
  export CMAKE_PREFIX_PATH="$PREFIX/usr:$PREFIX/usr/lib/x86_64-linux-gnu/cmake:${CMAKE_PREFIX_PATH:-}"
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/usr/lib/x86_64-linux-gnu/hdf5/serial:${LD_LIBRARY_PATH:-}"
  export PATH="$PREFIX/usr/bin:$PATH"
  export CPATH="$PREFIX/usr/include:$PREFIX/usr/include/hdf5/serial:${CPATH:-}"
  export PKG_CONFIG_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
  export HDF5_ROOT="$PREFIX/usr"
  export MPI_HOME="$PREFIX/usr"
fi
# cuDNN and NCCL from the CUDA image's Python wheels when the toolkit lacks them.
for pkg in cudnn nccl; do
  d=$(python3 -c "import nvidia.$pkg, os; print(os.path.dirname(nvidia.$pkg.__file__))" 2>/dev/null || true)
  if [[ -n "$d" ]]; then
    upper=$(echo "$pkg" | tr a-z A-Z)
    export "${upper}_ROOT=$d"
    export LD_LIBRARY_PATH="$d/lib:${LD_LIBRARY_PATH:-}"
    for so in "$d"/lib/lib${pkg}.so.*; do [[ -e "$d/lib/lib${pkg}.so" ]] || ln -sf "$so" "$d/lib/lib${pkg}.so"; done
  fi
done

echo "== device"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
echo "== commit $(git rev-parse HEAD 2>/dev/null || echo unknown), $(date -u +%F)"
ARCH="${MRMF_CUDA_ARCH:-90}"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMRMF_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" || exit 1
cmake --build build/gpu -j "$(nproc)" || exit 1
echo "== gpu tests"; (cd build/gpu && ctest -L gpu --output-on-failure)
echo "== unit tests"; (cd build/gpu && ctest -L unit -j 8 --output-on-failure | tail -5)
echo "== benchmarks"
for b in bench_kernels bench_conv bench_optim bench_data bench_train_step; do
  [[ -x build/gpu/bin/$b ]] && build/gpu/bin/$b 2>&1 | tee "$OUT_DIR/${b}_gpu.txt"
done
if [[ -f bench/torch_train_step.py ]]; then python3 bench/torch_train_step.py --device cuda 2>&1 | tee "$OUT_DIR/torch_train_step_gpu.txt"; fi
echo "== done: results in $OUT_DIR"
