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
  set_cpu_rows_geometry(g, r, omp_get_max_threads());
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
