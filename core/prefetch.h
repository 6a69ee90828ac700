// Software prefetch the compiler keeps. Why a header of its own: GCC 12
// deletes a loop of __builtin_prefetch calls as free of side effects (-O2 and
// -O3), silently, so on x86 the instruction is issued through inline asm.
// Users: the fused downsample kernel's CPU rows (a line 4 KB ahead per 64
// bytes converted, inside each row's loop; a derived level's next output
// row) and the loaders' sample gathers (the next sample of a shuffled order
// while this one is copied).
#pragma once

#include <cstddef>

namespace mrmf {

// One cache line (64 bytes) at p into all cache levels; never faults, also
// past the end of an allocation.
inline void prefetch_line(const void* p) {
#if defined(__x86_64__) && defined(__GNUC__)
  asm volatile("prefetcht0 (%0)" : : "r"(p));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// Every line of [p, p + bytes). For a gather of samples in shuffled order:
// the hardware prefetcher starts over at each sample (and each 4 KB page), so
// a copy of 19 KB Neuron Inverter samples from a RAM-resident shard ran at
// 72-77 % of a plain read on the 2-core VM; with the next sample prefetched
// while the current one is copied, 85-92 % (bench/results/cpu_data_2026-11-27c.txt).
inline void prefetch_bytes(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t k = 0; k < bytes; k += 64) prefetch_line(c + k);
}

}  // namespace mrmf
