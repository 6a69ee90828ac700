// Spin, then block: a short busy wait before a thread sleeps on a condition.
//
// Why: the loaders hand work between threads every batch -- the I/O thread
// offers a batch's chunks, the caller of next() takes some, each waits for
// the other's last chunk and for the finished batch. A batch of 128 Neuron
// Inverter samples from RAM takes ~100 us; a futex sleep and wake-up costs
// tens of microseconds on a VM, paid by the thread that would otherwise
// have picked up the work at once. Waiting on a flag for a bounded time
// first took the loader with an I/O thread (T 1600 -> 800) from 75-79 % to
// 80-90 % of a plain read on the 2-core VM, near the synchronous loader's
// 84-94 %, and its cached later epochs from 142-148 % to 174-176 %
// (bench/results/cpu_data_2026-11-28b.txt). The bound keeps a thread that
// waits for a slow read (HDF5, a large CosmoFlow batch) from burning a core
// the training step could use: past it, the caller blocks as before.
#pragma once

#include <chrono>

namespace mrmf {

// Tells the core that this is a spin loop (a hyperthread sibling gets the
// pipeline, the loop exits without a memory-order flush).
inline void cpu_relax() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) && defined(__GNUC__)
  asm volatile("yield" ::: "memory");
#endif
}

// Calls ready() until it returns true or `budget` has passed; returns its
// last answer. The caller then blocks (or goes on) as it would without it.
// ready() must be cheap and must not block (an atomic load).
template <class Ready>
bool spin_until(Ready ready, std::chrono::microseconds budget = std::chrono::microseconds(200)) {
  const auto end = std::chrono::steady_clock::now() + budget;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    // The clock every 64 rounds: a pause is ~10-150 cycles, a clock read ~20 ns.
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= end) return ready();
    cpu_relax();
  }
}

}  // namespace mrmf
