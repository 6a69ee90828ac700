// Division by a run-time constant through a multiply-high (Granlund and
// Montgomery, "Division by invariant integers using multiplication", PLDI'94,
// fig. 4.1). The index arithmetic of the pooling / BN / reducer functors
// divides every flat index by tensor extents; a 64-bit hardware divide costs
// 40+ cycles on many x86 cores (and is emulated on GPUs), the multiply a few.
// Exact for every 0 <= n < 2^64 and divisor 1 <= d < 2^64.
#pragma once

#include "kernels/hd.h"

namespace mrmf::kernels {

struct FastDiv {
  uint64_t d = 1;
  uint64_t magic = 0;  // 0: d is 1 (q = n)
  uint32_t shift = 0;

  FastDiv() = default;
  // Host only: computes the magic number.
  explicit FastDiv(int64_t divisor) : d(static_cast<uint64_t>(divisor < 1 ? 1 : divisor)) {
    if (d == 1) return;
    uint32_t l = 0;
    while ((uint64_t(1) << l) < d && l < 63) ++l;  // l = ceil(log2 d)
    if ((uint64_t(1) << l) < d) l = 64;
    const unsigned __int128 two64 = static_cast<unsigned __int128>(1) << 64;
    const unsigned __int128 pow_l = static_cast<unsigned __int128>(1) << l;
    magic = static_cast<uint64_t>(two64 * (pow_l - d) / d + 1);
    shift = l - 1;
  }

  MRMF_HD MRMF_INLINE static uint64_t mulhi(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
  }
  MRMF_HD MRMF_INLINE uint64_t div(uint64_t n) const {
    if (magic == 0) return n;
    const uint64_t t = mulhi(magic, n);
    return (t + ((n - t) >> 1)) >> shift;
  }
  // For non-negative signed indices.
  MRMF_HD MRMF_INLINE int64_t operator()(int64_t n) const {
    return static_cast<int64_t>(div(static_cast<uint64_t>(n)));
  }
  MRMF_HD MRMF_INLINE int64_t divisor() const { return static_cast<int64_t>(d); }
};

}  // namespace mrmf::kernels
