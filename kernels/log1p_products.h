// log1p of a block of integer counts as ONE logarithm: the fused downsample
// kernel's averages of log1p over blocks (CosmoFlow's input transform at
// 1/8, 1/2 x 1/2, ...), for 16-bit integer stored types.
//
// The sum of log1p(x_i) over a block is log(prod (1 + x_i)). For integers
// 1 + x_i is exact in float32, so the kernels multiply the factors as they
// stream the block's rows (one multiplication per element where they used
// to add) and take one logarithm per output instead of one log1p per
// input. Why: per-element log1p made the kernel compute-bound -- computed,
// 1/8 with log1p ran at 16-21 % of memcpy on the CPU and 12 % of a device
// copy on an H200; from the table of all 2^16 results, at 28-46 % on the
// 2-core Milan VM (one scalar load per element) and 71 % on the H200 (16
// table loads behind each row's load), where 1/8 without log1p runs at
// 60-72 % and 91 %.
//
// Range: factors are scaled by 2^-8 (exactly) into [2^-8, 2^8] (uint16) or
// {0} and [2^-8, 2^7] (int16), so the product of up to 15 of them stays
// within [2^-120, 2^120], normal floats; log_pow2_f32 adds the 8 * cells
// back to the exponent exactly. An int16 below -1 (log1p's domain error)
// is a NaN factor, so the block's result is NaN as log1p's sum would be; -1
// is a zero factor, -inf.
//
// Accuracy: each multiplication rounds once (relative 2^-24), so a block of
// n factors is within about n * 2^-24 of the exact sum of log1p, absolute,
// before the logarithm's own rounding (within 1 ulp of the sum). The sum of
// n table values rounds at each addition, at the sum's magnitude: the two
// are comparable (tests/unit/test_log1p_products.cpp bounds both against
// double precision: products within 1.9 ulp, sums within 2.8, on blocks of
// 15 elements). Not the same bits as summing: FusedGeom::allow_product
// false keeps the sums (benchmarks time both; CPU and GPU agree either way,
// as every traversal applies the same rule to the same blocks).
//
// Which blocks (FusedDownsample::by_product): levels read from the input
// whose block has kFusedProductMinCells to kFusedProductMaxCells elements.
// Below 4 the logarithm per output costs more than the table's loads save:
// on count-like input (the table's lines in L1) on the 2-core Milan VM, 1/2
// along x took 37.6 / 51.0 ms by products against 27.5 / 34.3 summed from
// the table; 2x2x1 19.2-21.2 against 23.8-24.4, 2x2x2 14.4-16.8 against
// 20.8-23.7 (bench/results/cpu_data_2026-11-29f.txt). On input whose values
// spread over the table (every 16-bit pattern), 2x2x2 went from 44.2-49.9
// to 14.4-19.4 ms.
#pragma once

#include <cstdint>

#include "kernels/hd.h"
#include "kernels/log1p.h"

namespace mrmf::kernels {

constexpr int64_t kFusedProductMinCells = 4;
constexpr int64_t kFusedProductMaxCells = 15;  // 15 * 8 = 120: the product's exponent range

// (1 + x) * 2^-8 for the 16-bit integer with bits `b` (the low 16 bits):
// exact. kSigned: int16, whose values below -1 give NaN.
template <bool kSigned>
MRMF_HD MRMF_INLINE float count_factor(uint32_t b) {
  constexpr float kScale = 1.f / 256.f;
  if constexpr (kSigned) {
    const int32_t v = static_cast<int32_t>(static_cast<int16_t>(static_cast<uint16_t>(b & 0xFFFFu))) + 1;
    // A bit-mask select, not `?:`: see log1p_detail::pick.
    return log1p_detail::pick(v >= 0, static_cast<float>(v) * kScale, log1p_detail::from_bits(0x7fc00000u));
  } else {
    return static_cast<float>(static_cast<int32_t>(b & 0xFFFFu) + 1) * kScale;
  }
}

// A block's fold, the same in every traversal: where it is reduced by
// products (kProd), count factors multiplied into 1; else values added to 0.
template <bool kProd>
MRMF_HD MRMF_INLINE float fold_start() {
  return kProd ? 1.f : 0.f;
}
template <bool kProd>
MRMF_HD MRMF_INLINE float fold_step(float acc, float v) {
  return kProd ? acc * v : acc + v;
}

// The sum of log1p over a block of `cells` elements from the product `p` of
// their count_factor<kSigned>()s. Unsigned factors are >= 2^-8, so their
// product is a positive normal float and needs no edge cases.
template <bool kSigned>
MRMF_HD MRMF_INLINE float log_of_count_product(float p, int64_t cells) {
  if constexpr (kSigned)
    return log_pow2_f32(p, 8 * static_cast<int>(cells));
  else
    return log_pow2_normal_f32(p, 8 * static_cast<int>(cells));
}

}  // namespace mrmf::kernels
