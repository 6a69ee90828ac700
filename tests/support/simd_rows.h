// The fused downsample's hand-written CPU rows (kernels/rows_avx512.h,
// rows_avx2.h) in tests: their process-wide switches kept, inputs for the
// direct checks, and the whole kernel run with each set of pieces
// (tests/unit/test_simd_rows.cpp, test_product_rows.cpp).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/fused_downsample_ops.h"
#include "kernels/rows_avx2.h"
#include "kernels/rows_avx512.h"
#include "support/fused_functors.h"

namespace mrmf::kernels::test {

// The hand-written rows' switches are process-wide: as they were when this
// was made (the AVX2 pieces: on; AVX-512: on unless MRMF_CPU_AVX512=0)
// whatever a test does until it goes.
struct SimdRowsKept {
  const bool avx512 = rows_avx512();
  ~SimdRowsKept() {
    set_rows_avx512(avx512);
    set_rows_avx2(true);
  }
};
// The AVX-512 test cases' start: a notice naming what then takes the plain
// loops, and nothing else, where the AVX-512 pieces are off.
#define SKIP_WITHOUT_AVX512_ROWS(what)                                     \
  do {                                                                     \
    if (!rows_avx512()) {                                                  \
      WARN("AVX-512 rows off (no AVX-512F, or MRMF_CPU_AVX512=0): " what); \
      return;                                                              \
    }                                                                      \
  } while (0)
// The AVX2 pieces alone (AVX-512 off); false where the CPU has no AVX2.
inline bool use_avx2_rows() {
  set_rows_avx512(false);
  set_rows_avx2(true);
  return rows_avx2();
}

// n 16-bit patterns with the extremes of uint16 and int16 (0xFFFF, 0x8000,
// 0x7FFF) at about three in every `period`, hashed values between: input
// for the direct checks of the integer AVX-512 rows.
inline std::vector<uint16_t> extreme_bits(size_t n, uint32_t period) {
  std::vector<uint16_t> x(n);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t h = static_cast<uint32_t>(k * 2654435761u >> 11);
    const uint32_t r = h % period;
    x[k] = r == 0 ? 0xFFFF : r == 1 ? 0x8000 : r == 2 ? 0x7FFF : static_cast<uint16_t>(h);
  }
  return x;
}
// Pattern b as the integer it holds (int16 where is_signed), as a float.
inline float int16_value(uint16_t b, bool is_signed) {
  return is_signed ? static_cast<float>(static_cast<int16_t>(b)) : static_cast<float>(b);
}
// A block's accumulator of n floats (small multiples of 0.75 around 0).
inline std::vector<float> ramp_acc(size_t n) {
  std::vector<float> acc(n);
  for (size_t k = 0; k < n; ++k) acc[k] = 0.75f * static_cast<float>(k % 11) - 3.f;
  return acc;
}

// The whole kernel with the plain loops, the AVX2 pieces (where the CPU
// has AVX2) and the AVX-512 pieces (where they were on), and with
// `functors` the functors' traversal: the same bits, level by level.
inline void check_simd_kernel(const Tensor& raw, const FusedDownsampleSpec& spec, bool functors) {
  const SimdRowsKept kept;
  set_rows_avx512(false);
  set_rows_avx2(false);
  const auto plain = fused_downsample(cpu_stream(), raw, spec);
  const auto ref = functors ? by_functor_any(raw, spec, plain, Traversal::Full) : std::vector<Tensor>{};
  const auto compare = [&](const char* pieces) {
    const auto simd = fused_downsample(cpu_stream(), raw, spec);
    for (size_t l = 0; l < simd.size(); ++l) {
      INFO(pieces << ", level " << l);
      CHECK(bit_equal(simd[l], plain[l]));
      if (functors) CHECK(bit_equal(simd[l], ref[l]));
    }
  };
  if (use_avx2_rows()) compare("AVX2 rows");
  if (kept.avx512) {
    set_rows_avx512(true);
    compare("AVX-512 rows");
  }
}

}  // namespace mrmf::kernels::test
