// CUDA launcher: a grid-stride kernel over [0, n) running the same functor
// the CPU backend runs. Grid size is capped at a few waves of SMs; the
// stride loop covers the rest (and keeps launches cheap for huge n).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/check_cuda.h"

namespace mrmf::kernels::cuda {

constexpr int kLaunchThreads = 256;  // per block, every grid-stride launch

// f(i) for i in [0, n), this thread's share of a grid-stride loop.
template <class F>
__device__ __forceinline__ void grid_stride(int64_t n, const F& f) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

template <class F>
__global__ void grid_stride_kernel(int64_t n, F f) {
  grid_stride(n, f);
}

int max_grid_blocks();  // 32 x SM count of the current device (cached)

// The same, for functors heavy enough that nvcc would give them more
// registers than kMinBlocks resident blocks per SM allow (occupancy: the
// loads in flight are what a memory-bound kernel runs on).
template <int kMinBlocks, class F>
__global__ void __launch_bounds__(kLaunchThreads, kMinBlocks) grid_stride_kernel_bounded(int64_t n, F f) {
  grid_stride(n, f);
}

inline unsigned grid_blocks(int64_t n) {
  const int64_t blocks = (n + kLaunchThreads - 1) / kLaunchThreads, cap = max_grid_blocks();
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

template <class F>
void launch(void* stream, int64_t n, const F& f) {
  if (n <= 0) return;
  grid_stride_kernel<<<grid_blocks(n), kLaunchThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, f);
  MRMF_CUDA_CHECK(cudaGetLastError());
}

template <int kMinBlocks, class F>
void launch_bounded(void* stream, int64_t n, const F& f) {
  if (n <= 0) return;
  grid_stride_kernel_bounded<kMinBlocks>
      <<<grid_blocks(n), kLaunchThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, f);
  MRMF_CUDA_CHECK(cudaGetLastError());
}

}  // namespace mrmf::kernels::cuda

namespace mrmf::kernels::cuda {

// Deterministic segmented sum in two passes, no atomics. Pass 1 cuts every
// segment into fixed chunks of kChunk elements, one block per (segment,
// chunk): a fixed per-thread strided walk and a fixed shared-memory tree give
// one partial each. Pass 2 adds a segment's partials in index order (in
// double). The result depends only on (S, m) -- never on scheduling -- and
// the work spreads over every SM even when S is small (a BatchNorm over 16
// channels of a 128^3 batch has 16 segments of 16.7 M values: one block per
// segment, as before, left 116 of 132 SMs idle and ran ~50x slower).
constexpr int kSumThreads = 256;
constexpr int64_t kSumChunk = 32 * kSumThreads;

template <class Term>
__global__ void segmented_sum_partial_kernel(int64_t m, int64_t chunks, Term term, float* out) {
  __shared__ float buf[kSumThreads];
  const int64_t s = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const int64_t j0 = c * kSumChunk, j1 = j0 + kSumChunk < m ? j0 + kSumChunk : m;
  float acc = 0.f;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += kSumThreads) acc += static_cast<float>(term(s, j));
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kSumThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

// A template so that every .cu including this header may instantiate it.
template <class Acc = double>
__global__ void segmented_sum_finish_kernel(int64_t S, int64_t chunks, const float* partial, float* out) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= S) return;
  Acc acc = 0;
  for (int64_t c = 0; c < chunks; ++c) acc += static_cast<Acc>(partial[s * chunks + c]);
  out[s] = static_cast<float>(acc);
}

template <class Term>
void segmented_sum(void* stream, int64_t S, int64_t m, const Term& term, float* out) {
  if (S <= 0) return;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int64_t chunks = m > 0 ? (m + kSumChunk - 1) / kSumChunk : 1;
  MRMF_CHECK(S * chunks < (int64_t(1) << 31), "segmented_sum: ", S, " x ", chunks, " blocks exceed the grid limit");
  if (chunks == 1) {  // one chunk per segment: its partial is the sum
    segmented_sum_partial_kernel<<<static_cast<unsigned>(S), kSumThreads, 0, st>>>(m, 1, term, out);
    MRMF_CUDA_CHECK(cudaGetLastError());
    return;
  }
  // Stream-ordered scratch: freed on the stream, so no other work can reuse
  // it before pass 2 has read it.
  float* partial = nullptr;
  MRMF_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial), sizeof(float) * size_t(S * chunks), st));
  segmented_sum_partial_kernel<<<static_cast<unsigned>(S * chunks), kSumThreads, 0, st>>>(m, chunks, term, partial);
  MRMF_CUDA_CHECK(cudaGetLastError());
  segmented_sum_finish_kernel<><<<static_cast<unsigned>((S + 127) / 128), 128, 0, st>>>(S, chunks, partial, out);
  MRMF_CUDA_CHECK(cudaGetLastError());
  MRMF_CUDA_CHECK(cudaFreeAsync(partial, st));
}

}  // namespace mrmf::kernels::cuda
