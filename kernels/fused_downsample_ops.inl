// Backend bodies of the fused raw-data downsample; see kernels/dispatch.h.
// The kernels themselves are in fused_downsample_run.inl; the CPU's are
// compiled apart, one stored type per translation unit
// (MRMF_FUSED_RUN_ELSEWHERE, defined by fused_downsample_ops.cpp).
#include <algorithm>

#include "kernels/fused_downsample.h"
#include "kernels/fused_downsample_ops.h"
#include "kernels/fused_downsample_chain.h"
#if !defined(MRMF_FUSED_RUN_ELSEWHERE)
#include "kernels/fused_downsample_run.inl"
#endif

namespace mrmf::kernels::MRMF_BACKEND_NS {

namespace fused_detail {
template <RawType R>
void run(Stream& s, const void* x, const FusedOutputs& o, const FusedGeom& g);
}  // namespace fused_detail

namespace {
#if defined(__CUDACC__)
// The pointer alignment the vector kernels' 16-byte loads and their stores
// of 4 / f2 floats per channel need.
bool vector_aligned(const void* x, const FusedOutputs& o, const FusedGeom& g) {
  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if (addr(x) % 16 != 0) return false;
  for (int l = 0; l < g.levels; ++l)
    if (addr(o.y[l]) % static_cast<uintptr_t>(4 * (kFusedChainVoxels / g.f[l][2])) != 0) return false;
  return true;
}

// Picks the GPU kernel for this request and sets the geometry it runs with:
// the calls' granularity along the last axis (g.chunk).
void choose_gpu_kernel(const void* x, const FusedOutputs& o, FusedGeom& g) {
  g.chunk = 1;  // one coarse position per thread: coalesced neighbours
  g.gpu_kernel = FusedGeom::GpuKernel::Positions;
  if (!g.allow_vector) return;
  if (const int64_t f2 = fused_vector_f2(g)) {  // one level, kV positions per thread
    if (!vector_aligned(x, o, g)) return;
    g.chunk = fused_vector_width(f2);
    g.gpu_kernel = FusedGeom::GpuKernel::Vector;
  } else if (fused_chain_levels(g) != 0 && vector_aligned(x, o, g)) {  // 4 input positions per thread
    g.chunk = kFusedChainVoxels / g.block[2];
    g.gpu_kernel = FusedGeom::GpuKernel::Chain;
  }
}
#endif
}  // namespace

void fused_downsample(Stream& s, const void* x, RawType r, const FusedOutputs& o, FusedGeom g) {
#if defined(__CUDACC__)
  g.group1 = 1;  // slabs are the CPU's; one_level() and calls() count single positions
  choose_gpu_kernel(x, o, g);
#else
  // When no level averages along axis 1 (block 1 there), each row continues
  // into the next one in memory, input and outputs alike, and the blocks
  // never straddle two rows: the (s1, s2) plane is then one long row (the
  // sums and their order are unchanged). Longer vector loops, and the row
  // set-up paid once per plane; the 1/1 conversion of a 128^3 cube otherwise
  // runs 128-element rows.
  if (g.block[1] == 1 && g.in[1] > 1) {
    g.in[2] *= g.in[1];
    g.nblk[2] *= g.nblk[1];
    for (int l = 0; l < g.levels; ++l) {
      g.out[l][2] *= g.out[l][1];
      g.out[l][1] = 1;
    }
    g.in[1] = g.nblk[1] = 1;
    g.s[1] = g.in[2] * g.s[2];
  }
  g.chunk = g.nblk[2];  // whole rows per call: index math once per row
  // Slabs of group1 blocks along axis 1 per call (see row_cpu): as many as
  // keep a slab's input and outputs within kSlabBytes. Measured on 128^3 cubes (2-core
  // EPYC, 1 MB L2): 64 KB slabs 20-40 % slower than 512 KB-4 MB ones, which
  // are alike -- long input streams matter more than L2 residency. (With the
  // levels advancing plane by plane, session 17: 256 KB 14 % slower, 2-4 MB
  // 1-3 % slower for three levels.)
  constexpr int64_t kSlabBytes = 1 << 20;
  const int64_t plane_row = g.block[0] * g.block[1] * g.in[2] * g.c;  // input elements per block along axis 1
  double per_block = double(plane_row) * (r == RawType::F32 ? 4 : 2);
  for (int l = 0; l < g.levels; ++l) per_block += 4.0 * plane_row / double(g.f[l][0] * g.f[l][1] * g.f[l][2]);
  g.group1 = std::max<int64_t>(1, std::min<int64_t>(g.nblk[1], static_cast<int64_t>(kSlabBytes / per_block)));
  // ... but no fewer calls than 4 per thread where the blocks allow it (one
  // 2-D sample has a single block along axis 0: its slabs are all the work).
  const int64_t outer = g.n * g.nblk[0], want = 4 * static_cast<int64_t>(omp_get_max_threads());
  if (outer * ((g.nblk[1] + g.group1 - 1) / g.group1) < want)
    g.group1 = std::max<int64_t>(1, std::min(g.group1, g.nblk[1] * outer / want));
#endif
  g.finalize();
  switch (r) {
    case RawType::U16: fused_detail::run<RawType::U16>(s, x, o, g); break;
    case RawType::I16: fused_detail::run<RawType::I16>(s, x, o, g); break;
    case RawType::F16: fused_detail::run<RawType::F16>(s, x, o, g); break;
    case RawType::F32: fused_detail::run<RawType::F32>(s, x, o, g); break;
  }
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
