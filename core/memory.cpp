#include "core/memory.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#ifdef MRMF_HAVE_CUDA
#include "core/check_cuda.h"
#endif

namespace mrmf {

namespace {
void* raw_cpu_alloc(size_t rounded) {
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  MRMF_CHECK(p != nullptr, "out of host memory allocating ", rounded, " bytes");
  return p;
}

// Host caching allocator. Why: glibc serves blocks above its mmap threshold
// (at most 32 MiB) with a fresh mmap and returns them with munmap, so every
// training step page-faulted its large activations in again (~25k faults,
// tens of ms, per 100 MB). Freed large blocks are kept in size buckets
// (caching_round_size, like the GPU allocator) and handed out again, so a
// steady-state step touches only already-mapped memory. Bounded: at most
// MRMF_CPU_CACHE_MB (default 2048; 0 disables) of free blocks are held, a
// block that would exceed it goes back to the system. Small blocks bypass
// the cache (malloc's own bins recycle them).
class HostCache {
 public:
  static constexpr size_t kMinCached = size_t(256) << 10;

  HostCache() {
    limit_ = size_t(2048) << 20;
    if (const char* e = std::getenv("MRMF_CPU_CACHE_MB")) limit_ = size_t(std::strtoull(e, nullptr, 10)) << 20;
  }
  bool enabled() const { return limit_ > 0; }

  void* allocate(size_t bytes) {
    size_t size = caching_round_size(bytes);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= 2 * size) {
        void* p = it->second;
        size = it->first;
        free_.erase(it);
        cached_ -= size;
        live_[p] = size;
        return p;
      }
    }
    void* p = raw_cpu_alloc(size);
    std::lock_guard<std::mutex> lk(mu_);
    live_[p] = size;
    return p;
  }

  // false: `p` did not come from the cache (the caller frees it).
  bool release(void* p) noexcept {
    void* drop = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return false;
      const size_t size = it->second;
      live_.erase(it);
      // Over the bound: evict the largest cached blocks first, then keep p if it fits.
      while (cached_ + size > limit_ && !free_.empty()) {
        auto big = std::prev(free_.end());
        std::free(big->second);
        cached_ -= big->first;
        free_.erase(big);
      }
      if (cached_ + size <= limit_) {
        free_.emplace(size, p);
        cached_ += size;
      } else {
        drop = p;
      }
    }
    std::free(drop);
    return true;
  }

  void trim() noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> live_;
  size_t cached_ = 0, limit_ = 0;
};

// Leaked on purpose: tensors with static storage duration may be freed after
// a function-local static would have been destroyed.
HostCache& host_cache() {
  static auto* c = new HostCache();
  return *c;
}
}  // namespace

void* cpu_alloc(size_t bytes) {
  if (bytes == 0) bytes = kCpuAlignment;
  size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  HostCache& cache = host_cache();
  if (rounded >= HostCache::kMinCached && cache.enabled()) return cache.allocate(rounded);
  return raw_cpu_alloc(rounded);
}

void cpu_free(void* p) noexcept {
  if (!p) return;
  if (!host_cache().release(p)) std::free(p);
}

void release_cached_host_memory() noexcept { host_cache().trim(); }

void* pinned_alloc(size_t bytes) {
#ifdef MRMF_HAVE_CUDA
  if (cuda_device_count() > 0) {
    void* p = nullptr;
    MRMF_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
    return p;
  }
#endif
  return cpu_alloc(bytes);
}

void pinned_free(void* p) noexcept {
  if (!p) return;
#ifdef MRMF_HAVE_CUDA
  // cudaFreeHost refuses pointers it did not allocate; fall back to free().
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeHost) {
    MRMF_CUDA_WARN(cudaFreeHost(p));
    return;
  }
  cudaGetLastError();
#endif
  cpu_free(p);
}

size_t caching_round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20, kSplit = size_t(1) << 20;
  if (bytes == 0) return kSmall;
  if (bytes < kSplit) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

#ifdef MRMF_HAVE_CUDA
namespace {
// One per device. Free blocks are exact-size buckets of rounded sizes; a
// request takes the smallest cached block that fits within 2x of it (so small
// requests do not pin huge blocks), otherwise cudaMalloc, and on
// out-of-memory the cache is emptied and the allocation retried once.
class CachingAllocator {
 public:
  void* allocate(int device, size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    size_t size = caching_round_size(bytes);
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      void* p = it->second;
      size = it->first;
      free_.erase(it);
      stats_.cached -= size;
      return note_alloc(p, size);
    }
    void* p = nullptr;
    int prev = 0;
    MRMF_CUDA_CHECK(cudaGetDevice(&prev));
    if (prev != device) MRMF_CUDA_CHECK(cudaSetDevice(device));
    cudaError_t st = cudaMalloc(&p, size);
    if (st == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_locked();
      st = cudaMalloc(&p, size);
    }
    if (prev != device) MRMF_CUDA_WARN(cudaSetDevice(prev));
    if (st != cudaSuccess) {
      cudaGetLastError();
      MRMF_THROW(Device, "out of GPU memory on cuda:", device, " allocating ", size, " bytes (", stats_.in_use,
                 " in use, peak ", stats_.peak_in_use, "): ", cudaGetErrorString(st));
    }
    ++stats_.num_device_allocs;
    return note_alloc(p, size);
  }

  void free(void* p) noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;
    size_t size = it->second;
    live_.erase(it);
    stats_.in_use -= size;
    stats_.cached += size;
    free_.emplace(size, p);
  }

  void release() noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    release_locked();
  }

  CudaMemoryStats stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.peak_in_use = stats_.in_use;
  }

 private:
  void* note_alloc(void* p, size_t size) {
    live_[p] = size;
    stats_.in_use += size;
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
    return p;
  }
  void release_locked() noexcept {
    // Blocks are only cached after their last use was enqueued; wait for the
    // device before returning them to the driver.
    if (!free_.empty()) MRMF_CUDA_WARN(cudaDeviceSynchronize());
    for (auto& [size, p] : free_) MRMF_CUDA_WARN(cudaFree(p));
    free_.clear();
    stats_.cached = 0;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> live_;
  CudaMemoryStats stats_;
};

// Leaked on purpose: see the header.
std::vector<CachingAllocator*>& allocators() {
  static auto* v = new std::vector<CachingAllocator*>();
  return *v;
}
std::mutex& allocators_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
CachingAllocator& allocator_for(int device) {
  std::lock_guard<std::mutex> lk(allocators_mutex());
  auto& v = allocators();
  if (static_cast<int>(v.size()) <= device) v.resize(device + 1, nullptr);
  if (!v[device]) v[device] = new CachingAllocator();
  return *v[device];
}
}  // namespace

void* cuda_alloc(int device, size_t bytes, void* /*stream*/) { return allocator_for(device).allocate(device, bytes); }
void cuda_free(int device, void* p) noexcept {
  if (p) allocator_for(device).free(p);
}
CudaMemoryStats cuda_memory_stats(int device) { return allocator_for(device).stats(); }
void reset_cuda_peak(int device) { allocator_for(device).reset_peak(); }
void release_cached_memory() noexcept {
  release_cached_host_memory();
  std::lock_guard<std::mutex> lk(allocators_mutex());
  for (auto* a : allocators())
    if (a) a->release();
}

static cudaMemcpyKind memcpy_kind(MemoryKind dst, MemoryKind src) {
  const bool d_dev = dst == MemoryKind::Cuda, s_dev = src == MemoryKind::Cuda;
  if (d_dev && s_dev) return cudaMemcpyDeviceToDevice;
  if (d_dev) return cudaMemcpyHostToDevice;
  if (s_dev) return cudaMemcpyDeviceToHost;
  return cudaMemcpyHostToHost;
}
#else
void* cuda_alloc(int device, size_t, void*) { MRMF_THROW(Device, "cuda:", device, ": mrmf was built without CUDA"); }
void cuda_free(int, void*) noexcept {}
CudaMemoryStats cuda_memory_stats(int) { return {}; }
void reset_cuda_peak(int) {}
void release_cached_memory() noexcept { release_cached_host_memory(); }
#endif

void copy_bytes(void* dst, MemoryKind dst_kind, const void* src, MemoryKind src_kind, size_t bytes, void* stream) {
  if (bytes == 0) return;
  if (dst_kind != MemoryKind::Cuda && src_kind != MemoryKind::Cuda) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef MRMF_HAVE_CUDA
  MRMF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, memcpy_kind(dst_kind, src_kind), static_cast<cudaStream_t>(stream)));
  // A pageable host source/destination makes the copy synchronous w.r.t. the
  // host anyway; for pinned memory the caller synchronizes the stream.
#else
  MRMF_THROW(Device, "device copy requested but mrmf was built without CUDA");
#endif
}

void zero_bytes(void* dst, MemoryKind kind, size_t bytes, void* stream) {
  if (bytes == 0) return;
  if (kind != MemoryKind::Cuda) {
    std::memset(dst, 0, bytes);
    return;
  }
#ifdef MRMF_HAVE_CUDA
  MRMF_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
#endif
}

}  // namespace mrmf
