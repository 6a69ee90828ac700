// Timing pieces the benchmarks share (header-only: each bench is one
// executable, bench/CMakeLists.txt). What a kernel's time is compared with
// must be measured the same way in every bench, so it is written once.
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>

#include "core/stream.h"

namespace mrmf::bench {

// The best of `reps` times of fn on s, in seconds, after one warm-up call:
// by events on a GPU stream (the device's time, not the launch's), by the
// wall clock on the CPU (whose "stream" runs fn at once).
inline double best_time(Stream& s, int reps, const std::function<void()>& fn) {
  fn();
  s.synchronize();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    if (s.device().is_cuda()) {
      Event a = Event::create(s.device()), b = Event::create(s.device());
      a.record(s);
      fn();
      b.record(s);
      b.synchronize();
      best = std::min(best, b.elapsed_ms_since(a) * 1e-3);
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return best;
}

// A memcpy split over the OpenMP threads: the CPU kernels run on all of
// them, so does the copy they are compared with.
inline void par_memcpy(void* dst, const void* src, std::size_t bytes) {
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const std::size_t lo = bytes * id / nt, hi = bytes * (id + 1) / nt;
    std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
  }
}

}  // namespace mrmf::bench
