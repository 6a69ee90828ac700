// Host/device qualifiers for functor headers shared by g++ and nvcc.
//
// Every custom kernel's math lives in a functor struct with an
// `MRMF_HD void operator()(int64_t i) const` (one output element per call).
// g++ compiles it into the OpenMP loop of the CPU backend, nvcc into the
// grid-stride kernel of the CUDA backend: one definition, two backends, so
// the CPU tests verify the GPU math.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MRMF_HD __host__ __device__
#define MRMF_INLINE __forceinline__
#else
#define MRMF_HD
#define MRMF_INLINE inline
#endif

// Keeps a host function out of its callers, GCC's `flatten` included: for
// the rarely-run variants that the flattened AVX2 copies of the CPU rows
// (kernels/fused_downsample_run.inl) would otherwise inline, which cost
// compile time and bought no speed. Nothing on the device.
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
#define MRMF_HOST_NOINLINE __attribute__((noinline))
#else
#define MRMF_HOST_NOINLINE
#endif

// Fully unrolls the next loop (constant trip count): keeps small per-thread
// arrays indexed by its counter in registers on the GPU.
#if defined(__CUDACC__)
#define MRMF_UNROLL _Pragma("unroll")
#elif defined(__clang__)
#define MRMF_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define MRMF_UNROLL _Pragma("GCC unroll 16")
#else
#define MRMF_UNROLL
#endif
// Keeps the next loop rolled on the GPU, where nvcc would otherwise unroll a
// run-time-bounded loop and hoist its loads, trading occupancy (registers)
// for in-flight loads that the loop body already has.
#if defined(__CUDACC__)
#define MRMF_NO_UNROLL _Pragma("unroll 1")
#else
#define MRMF_NO_UNROLL
#endif

namespace mrmf::kernels {

template <class T>
MRMF_HD MRMF_INLINE T max_of(T a, T b) { return a > b ? a : b; }
template <class T>
MRMF_HD MRMF_INLINE T min_of(T a, T b) { return a < b ? a : b; }

// LeakyReLU (slope 0 = ReLU) and its backward, shared by the element-wise and
// fused-epilogue functors. Written as selects feeding one multiply and one
// add rather than `v > 0 ? v : slope * v`: with -ftrapping-math (GCC's
// default) a multiply under a condition may not be executed speculatively,
// so that form kept every CPU loop scalar and branchy (~1.5 GB/s), and GCC
// folds `v * (v > 0 ? 1 : slope)` back into it. The values are identical
// except that a zero result is +0 (PyTorch's relu gives +0 as well).
MRMF_HD MRMF_INLINE float leaky_relu_value(float v, float slope) {
  return (v > 0.f ? v : 0.f) + slope * (v > 0.f ? 0.f : v);
}
// dy * (z > 0 ? 1 : slope): the slope is used at the kink z == 0, as PyTorch does.
MRMF_HD MRMF_INLINE float leaky_relu_grad(float dy, float z, float slope) {
  return (z > 0.f ? dy : 0.f) + slope * (z > 0.f ? 0.f : dy);
}

}  // namespace mrmf::kernels
