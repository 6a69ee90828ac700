// Memory: aligned host allocations, pinned staging buffers and the caching GPU
// allocator.
//
// * CPU buffers are 64-byte aligned (one cache line, one AVX-512 vector).
// * Pinned host buffers are page-locked (cudaMallocHost) when a GPU is in use,
//   plain aligned memory otherwise, so the loader's code path is the same.
// * GPU buffers come from a caching allocator: freed blocks are kept per
//   device, keyed by rounded size, and handed out again -- no cudaMalloc per
//   training step. The allocator is created on first use and deliberately
//   never destroyed at static exit (the CUDA driver may already be shutting
//   down then); release_cached_memory() returns the cache explicitly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace mrmf {

constexpr size_t kCpuAlignment = 64;

// Large host blocks (>= 256 KiB) are recycled through a bounded cache (see
// memory.cpp; MRMF_CPU_CACHE_MB caps it, 0 disables it).
void* cpu_alloc(size_t bytes);
void cpu_free(void* p) noexcept;
// Returns the host cache's free blocks to the system (release_cached_memory() does too).
void release_cached_host_memory() noexcept;

void* pinned_alloc(size_t bytes);
void pinned_free(void* p) noexcept;

// Device allocations through the caching allocator. `stream` is the
// cudaStream_t the block will be used on (nullptr: default stream).
void* cuda_alloc(int device, size_t bytes, void* stream = nullptr);
void cuda_free(int device, void* p) noexcept;

struct CudaMemoryStats {
  size_t in_use = 0;       // bytes handed out and not yet freed
  size_t peak_in_use = 0;  // high-water mark of in_use
  size_t cached = 0;       // bytes held in the free lists
  size_t num_device_allocs = 0;  // real cudaMalloc calls so far
};
CudaMemoryStats cuda_memory_stats(int device);
void reset_cuda_peak(int device);
// Frees every cached (not in use) block on every device, and the host cache.
void release_cached_memory() noexcept;

// Size rounding used by the caching allocator (exposed for tests): 512-byte
// granules below 1 MiB, 2 MiB granules above, so that a block can be reused
// for requests that differ slightly (e.g. the last, smaller batch of an epoch).
size_t caching_round_size(size_t bytes);

enum class MemoryKind : uint8_t { Cpu, Pinned, Cuda };

// Copies `bytes` between any two kinds of memory; asynchronous on `stream`
// when a device side is involved (the caller synchronizes before reading).
void copy_bytes(void* dst, MemoryKind dst_kind, const void* src, MemoryKind src_kind, size_t bytes,
                void* stream = nullptr);
// Sets `bytes` bytes to zero.
void zero_bytes(void* dst, MemoryKind kind, size_t bytes, void* stream = nullptr);

}  // namespace mrmf
