// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator. The random numbers for (key, counter) are a pure
// function of them, so the CPU and the GPU draw identical streams -- the same
// dropout mask for the same seed and step -- whatever the thread count.
#pragma once

#include "kernels/hd.h"

namespace mrmf::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

MRMF_HD MRMF_INLINE void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// Ten rounds of Philox4x32 on counter c with key k.
MRMF_HD MRMF_INLINE Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                             uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(M0, c0, hi0, lo0);
    philox_mulhilo(M1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += W0;
    k1 += W1;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// Uniform float in [0, 1) from the top 24 bits.
MRMF_HD MRMF_INLINE float uint_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

// The i-th uniform [0,1) number of stream (seed, stream_id): element i uses
// lane i % 4 of counter block i / 4.
MRMF_HD MRMF_INLINE float philox_uniform(uint64_t seed, uint64_t stream_id, uint64_t i) {
  const uint64_t block = i >> 2;
  const Philox4x32 r = philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                     static_cast<uint32_t>(stream_id), static_cast<uint32_t>(stream_id >> 32),
                                     static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return uint_to_unit_float(r.v[i & 3]);
}

}  // namespace mrmf::kernels
