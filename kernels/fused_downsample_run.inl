// The fused downsample's kernels per stored type and transform, for one
// backend (MRMF_BACKEND_NS): the CPU's row traversal (baseline and AVX2
// copies) and the GPU's three kernels. fused_downsample_ops.inl chooses the
// geometry and calls fused_detail::run<R>. The CPU instantiates run<R> in
// one translation unit per stored type (fused_downsample_cpu_*.cpp): the
// flattened AVX2 row copies made the single TU take ~4 minutes to compile,
// the longest step of a 16-core build. The variants no real data set runs
// (FusedSegmentsCpu::block_runtime, the per-position fallbacks) stay out of
// those copies: 273-366 -> 101-164 s per TU in a 2-core build.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "kernels/fused_downsample.h"
#include "kernels/fused_downsample_chain.h"
#include "kernels/fused_downsample_ops.h"
#if !defined(__CUDACC__)
#include "kernels/fused_downsample_rows.h"
#endif

namespace mrmf::kernels::MRMF_BACKEND_NS {

namespace {
#if !defined(__CUDACC__)
template <class F>
void rows(const F& f, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) f.row_cpu(i);
}
#if defined(__x86_64__) && defined(__GNUC__)
// The library is built for baseline x86-64, whose SSE2 has no byte shuffle:
// the channels-last deinterleave then stays compute-bound at well under
// memcpy bandwidth on one core. The same rows compiled for AVX2 (flatten:
// row_cpu and its helpers are inlined into this copy) are chosen at run time
// where the CPU has it. Not "fma": contracting x * scale + shift would
// change the bits. Aligned to a cache line: where the copy starts decides
// how its inner loops fall on 64-byte lines, and an unrelated change that
// moved it by 32 bytes made 1/8 (2x2x2) 10 % slower (91 -> 82 % of memcpy,
// the same instructions; session 32).
template <class F>
__attribute__((target("avx2"), flatten, aligned(64))) void rows_copy_avx2(const F& f, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) f.row_cpu(i);
}
inline bool cpu_runs_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif
template <class F>
void run_rows(const F& f, int64_t lo, int64_t hi) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu_runs_avx2()) {
    rows_copy_avx2(f, lo, hi);
    return;
  }
#endif
  rows(f, lo, hi);
}
#endif

#if defined(__CUDACC__)
// log1p_table()'s three tables on the device: module-scope memory, which the
// CUDA context owns (nothing to free at static exit), filled from the
// host's tables once per device -- the same bits as the CPU's rows.
__device__ float g_log1p_tables[3][1 << 16];

const float* device_log1p_table(RawType r) {
  const int slot = r == RawType::U16 ? 0 : r == RawType::I16 ? 1 : 2;
  constexpr size_t kBytes = sizeof(float) << 16;
  int dev = 0;
  MRMF_CUDA_CHECK(cudaGetDevice(&dev));
  static std::mutex mu;
  static std::map<std::pair<int, int>, const float*> filled;  // (device, slot) -> its table
  std::lock_guard<std::mutex> lock(mu);
  const auto it = filled.find({dev, slot});
  if (it != filled.end()) return it->second;
  MRMF_CUDA_CHECK(cudaMemcpyToSymbol(g_log1p_tables, log1p_table(r), kBytes, slot * kBytes, cudaMemcpyHostToDevice));
  // Complete before any stream of any thread may read it.
  MRMF_CUDA_CHECK(cudaDeviceSynchronize());
  void* p = nullptr;
  MRMF_CUDA_CHECK(cudaGetSymbolAddress(&p, g_log1p_tables));
  const float* table = static_cast<const float*>(p) + (size_t(slot) << 16);
  filled.emplace(std::make_pair(dev, slot), table);
  return table;
}
#endif

template <RawType R, FusedTransform TF>
void run2(Stream& s, const void* x, const FusedOutputs& o, const FusedGeom& g) {
  using T = typename RawLoad<R>::T;
  FusedDownsample<R, TF> f{static_cast<const T*>(x), o, g};
  if (TF == FusedTransform::Log1p && RawLoad<R>::kBits16 && g.allow_table) {
#if defined(__CUDACC__)
    f.lut = device_log1p_table(R);
#else
    f.lut = log1p_table(R);
#endif
  }
#if defined(__CUDACC__)
  // fused_downsample() chose the kernel (and g.chunk to match).
  if (g.gpu_kernel == FusedGeom::GpuKernel::Vector) {
    with_vector_kernel(f, [&](const auto& k) {
      cuda::launch_bounded<std::decay_t<decltype(k)>::kMinBlocks>(s.native(), g.calls(), k);
    });
    return;
  }
  if (g.gpu_kernel == FusedGeom::GpuKernel::Chain) {
    with_chain_kernel(f, [&](const auto& k) {
      cuda::launch_bounded<std::decay_t<decltype(k)>::kMinBlocks>(s.native(), g.calls(), k);
    });
    return;
  }
  // One level (every loader's case): its own kernel, held to 64 registers
  // (four resident 256-thread blocks per SM). ptxas -v, sm_90: 50-64
  // registers and no spills for every stored type and transform, where
  // unbounded nvcc unrolled the grid-stride loop into 85-121; the general
  // traversal takes 166-168 and spills under any bound (104-700 bytes at
  // 128-64 registers), so the multi-level case keeps the plain launch.
  if (g.levels == 1)
    cuda::launch_bounded<4>(s.native(), g.calls(), FusedDownsampleOne<R, TF>{f});
  else
    launch(s.native(), g.calls(), f);
#else
  // Own loop rather than launch(): a call is a whole row here, so the
  // parallel threshold is on the elements touched, not on the call count.
  // Serial requests (small samples, one thread) skip the OpenMP region
  // altogether: entering even a one-thread region costs about as much as
  // converting a Neuron Inverter sample.
  const int64_t calls = g.calls();
  const FusedRowsCpu<R, TF> rows_f(f);
  const bool par = calls > 1 && g.n * g.c * g.in[0] * g.in[1] * g.in[2] >= (int64_t(1) << 15) &&
                   omp_get_max_threads() > 1;
  if (!par) {
    run_rows(rows_f, 0, calls);
    return;
  }
  // One contiguous range of rows per thread (what schedule(static) does).
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    run_rows(rows_f, calls * id / nt, calls * (id + 1) / nt);
  }
#endif
}
}  // namespace

namespace fused_detail {
template <RawType R>
void run(Stream& s, const void* x, const FusedOutputs& o, const FusedGeom& g) {
  switch (g.transform) {
    case FusedTransform::None: run2<R, FusedTransform::None>(s, x, o, g); break;
    case FusedTransform::Log1p: run2<R, FusedTransform::Log1p>(s, x, o, g); break;
    case FusedTransform::Scale: run2<R, FusedTransform::Scale>(s, x, o, g); break;
  }
}
}  // namespace fused_detail

}  // namespace mrmf::kernels::MRMF_BACKEND_NS

// Explicit instantiation of run<R> (inside no namespace).
#define MRMF_FUSED_DOWNSAMPLE_RUN(R)                                                                 \
  template void mrmf::kernels::MRMF_BACKEND_NS::fused_detail::run<mrmf::kernels::RawType::R>( \
      mrmf::Stream&, const void*, const mrmf::kernels::FusedOutputs&, const mrmf::kernels::FusedGeom&)
