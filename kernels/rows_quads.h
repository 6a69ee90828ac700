// The scalar side of the four-channel 16-bit rows (kernels/rows_avx512.cpp
// and kernels/rows_avx2.cpp): the value of an input, the outputs one by one
// (the vector loops' tails, and the whole where no vector code is
// compiled), and the prefetch of a step's lines. Internal to those two
// files; the formulas are in kernels/rows_avx512.h.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/prefetch.h"

namespace mrmf::kernels::quads {

// The value of 16-bit input k for the four-channel rows: log1p from the
// table (table_rows_out4_avx512), or the integer itself
// (convert_rows_out4_avx512; int16 where `is_signed`).
struct Value16 {
  const float* table;  // null: the integer
  bool is_signed;
  float operator()(const uint16_t* x, int64_t k) const {
    if (table) return table[x[k]];
    return is_signed ? static_cast<float>(static_cast<int16_t>(x[k])) : static_cast<float>(x[k]);
  }
};
// Outputs [w0, w1) of the four-channel rows one by one: their tails, and
// the whole where the vector code is not compiled.
inline void out4_positions(const float* acc, const uint16_t* x, int64_t w0, int64_t w1, Value16 value, float* y,
                           int64_t ystride, float inv) {
  for (int64_t w = w0; w < w1; ++w)
    for (int64_t c = 0; c < 4; ++c) {
      const float t = value(x, 4 * w + c);
      y[c * ystride + w] = (0.f + (acc ? acc[4 * w + c] + t : t)) * inv;
    }
}
// Outputs [w0, w1) of pair_sums4_avx512 and pair_sums4_avx2 one by one:
// their tails, and the whole where the vector code is not compiled.
inline void pair4_positions(const float* acc, const uint16_t* x, Value16 value, int64_t w0, int64_t w1, float* y,
                            int64_t ystride, float inv) {
  const auto t = [&](int64_t k) { return acc ? acc[k] + value(x, k) : value(x, k); };
  for (int64_t w = w0; w < w1; ++w)
    for (int64_t c = 0; c < 4; ++c) y[c * ystride + w] = ((0.f + t(8 * w + c)) + t(8 * w + 4 + c)) * inv;
}

// Calls row(first, is_signed) with std::bool_constant arguments, `first`
// where there is no accumulator (a block's only row): the four
// instantiations of a row, chosen once per call.
template <class Row>
void by_kind(const float* acc, bool is_signed, const Row& row) {
  if (acc && is_signed)
    row(std::false_type{}, std::true_type{});
  else if (acc)
    row(std::false_type{}, std::false_type{});
  else if (is_signed)
    row(std::true_type{}, std::true_type{});
  else
    row(std::true_type{}, std::false_type{});
}

// The two lines of a 128-byte step `bytes` ahead (none where bytes is 0).
inline void prefetch_step128(const uint16_t* xs, int64_t bytes) {
  if (bytes > 0) {
    prefetch_line(reinterpret_cast<const char*>(xs) + bytes);
    prefetch_line(reinterpret_cast<const char*>(xs) + bytes + 64);
  }
}

}  // namespace mrmf::kernels::quads
