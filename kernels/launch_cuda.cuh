// CUDA launcher: a grid-stride kernel over [0, n) running the same functor
// the CPU backend runs. Grid size is capped at a few waves of SMs; the
// stride loop covers the rest (and keeps launches cheap for huge n).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/check_cuda.h"

namespace mrmf::kernels::cuda {

template <class F>
__global__ void grid_stride_kernel(int64_t n, F f) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

int max_grid_blocks();  // 32 x SM count of the current device (cached)

template <class F>
void launch(void* stream, int64_t n, const F& f) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  int64_t blocks = (n + kThreads - 1) / kThreads;
  const int cap = max_grid_blocks();
  if (blocks > cap) blocks = cap;
  grid_stride_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, f);
  MRMF_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mrmf::kernels::cuda

namespace mrmf::kernels::cuda {

// Deterministic segmented sum: one block per segment, a fixed per-thread
// strided walk and a fixed shared-memory tree, so the result depends only
// on (S, m) and the block size -- never on scheduling. No atomics.
template <class Term>
__global__ void segmented_sum_kernel(int64_t m, Term term, float* out) {
  constexpr int kThreads = 256;
  __shared__ float buf[kThreads];
  const int64_t s = blockIdx.x;
  float acc = 0.f;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) acc += static_cast<float>(term(s, j));
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[s] = buf[0];
}

template <class Term>
void segmented_sum(void* stream, int64_t S, int64_t m, const Term& term, float* out) {
  if (S <= 0) return;
  segmented_sum_kernel<<<static_cast<unsigned>(S), 256, 0, static_cast<cudaStream_t>(stream)>>>(m, term, out);
  MRMF_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mrmf::kernels::cuda
