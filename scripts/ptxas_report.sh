#!/usr/bin/env bash
# Registers, spills and stack per CUDA kernel, read off the compiler (ptxas -v)
# -- no GPU needed. Occupancy follows from registers: an SM holds 65536, so a
# 256-thread block at R registers per thread allows floor(65536 / (256 R))
# resident blocks (at most 8 of 256 threads). Session 14 found the fused
# downsample kernel at 116-126 registers (two blocks per SM, 18-25 % of a
# device copy on an H100) this way.
#
#   scripts/ptxas_report.sh [BUILD_DIR] [ARCH]     (defaults: build/cuda, 90)
#
# Recompiles each kernels/*_cuda.cu of BUILD_DIR's mrmf library with the
# build's own flags for one architecture, into a scratch folder (the build
# is untouched), and prints one line per kernel instantiation:
#   registers  spill-stores  spill-loads  stack  blocks/SM  file  kernel
set -euo pipefail
build=${1:-build/cuda}
arch=${2:-90}
[[ -f "$build/build.ninja" ]] || { echo "ptxas_report: no Ninja build in '$build' (configure it first: cmake --preset cuda -G Ninja)" >&2; exit 2; }
[[ "$arch" =~ ^[0-9]+$ ]] || { echo "ptxas_report: ARCH must be a number like 90, got '$arch'" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# grep finding nothing must not end the script here (set -e with pipefail
# did, silently, before the message below could say why).
objs=$(ninja -C "$build" -t targets all | { grep -o 'CMakeFiles/mrmf.dir/kernels/[a-z_]*_cuda\.cu\.o' || true; } | sort -u)
[[ -n "$objs" ]] || { echo "ptxas_report: no kernels/*_cuda.cu objects in '$build' (a CPU-only build?)" >&2; exit 2; }
printf '%5s %6s %6s %6s %5s  %-28s %s\n' regs spillS spillL stack blk/SM file kernel
for o in $objs; do
  name=$(basename "$o" .cu.o)
  cmd=$(ninja -C "$build" -t commands "$o" | tail -1)
  # One architecture, no dependency file, output into the scratch folder.
  cmd=$(echo "$cmd" | sed -E "s# -o [^ ]+\.cu\.o# -o $scratch/$name.o#; s# -MD -MT [^ ]+ -MF [^ ]+##; s#--generate-code=arch=compute_[0-9]+,code=\[compute_[0-9]+,sm_[0-9]+\]##g")
  (cd "$build" && eval "$cmd --generate-code=arch=compute_$arch,code=sm_$arch -Xptxas -v") > "$scratch/$name.txt" 2>&1 ||
    { cat "$scratch/$name.txt" >&2; echo "ptxas_report: compiling $name failed" >&2; exit 1; }
  python3 - "$scratch/$name.txt" "$name" <<'PY'
import re, subprocess, sys
text, name = open(sys.argv[1]).read().splitlines(), sys.argv[2]
rows, fn = [], None
for line in text:
    m = re.search(r"Function properties for (\S+)", line)
    if m: fn = m.group(1); continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and fn: stack, ss, sl = m.groups(); continue
    m = re.search(r"Used (\d+) registers", line)
    if m and fn:
        rows.append((int(m.group(1)), ss, sl, stack, fn)); fn = None
if rows:
    names = subprocess.run(["c++filt"], input="\n".join(r[4] for r in rows), capture_output=True, text=True).stdout.splitlines()
    for (regs, ss, sl, stack, _), full in sorted(zip(rows, names), key=lambda x: -x[0][0]):
        short = re.sub(r"\(anonymous namespace\)::|mrmf::kernels::(cuda::)?", "", full)
        blocks = min(8, 65536 // (256 * max(regs, 1)))
        print(f"{regs:5d} {ss:>6} {sl:>6} {stack:>6} {blocks:5d}  {name:<28} {short[:160]}")
PY
done
