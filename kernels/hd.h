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

namespace mrmf::kernels {

template <class T>
MRMF_HD MRMF_INLINE T max_of(T a, T b) { return a > b ? a : b; }
template <class T>
MRMF_HD MRMF_INLINE T min_of(T a, T b) { return a < b ? a : b; }

}  // namespace mrmf::kernels
