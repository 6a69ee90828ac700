// The shared side of the four-channel 16-bit rows (kernels/rows_avx512.cpp
// and kernels/rows_avx2.cpp): the value of an input, how a block's last
// row folds values into outputs (sums, or products under log1p), the
// outputs one by one (the vector loops' tails, and the whole where no
// vector code is compiled), and the prefetch of a step's lines. Internal to
// those two files; the formulas are in kernels/rows_avx512.h.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/prefetch.h"
#include "kernels/log1p_lanes.h"

namespace mrmf::kernels::quads {

// The value of 16-bit input k for the four-channel rows: log1p from the
// table (table_rows_out4_*), or the integer itself (convert_rows_out4_*,
// pair_sums4_*; int16 where `is_signed`).
struct Value16 {
  const float* table;  // null: the integer
  bool is_signed;
  float operator()(const uint16_t* x, int64_t k) const {
    if (table) return table[x[k]];
    return is_signed ? static_cast<float>(static_cast<int16_t>(x[k])) : static_cast<float>(x[k]);
  }
};
// The count factor of 16-bit input k (kernels/log1p_products.h): the
// value of the rows reduced by products.
template <bool kSigned>
struct Factor16 {
  static constexpr const float* table = nullptr;  // as Value16's: the rows take no table
  float operator()(const uint16_t* x, int64_t k) const { return count_factor<kSigned>(x[k]); }
};

// How a block's last row folds into outputs, written once for a float (the
// tails) and for vector lanes (F = __m512 or __m256, through GCC's vector
// extensions; inlined into the target functions). scale holds inv in every
// lane. step: a value into the accumulated rows; out: an output from one
// position; pair: an output from two positions along the last axis.
// as(): the same fold on lanes.
// Sums: (0 + (acc +) v) * inv, pairs ((0 + a) + b) * inv.
template <class F>
struct SumFold {
  static constexpr bool kProduct = false;
  F scale;
  MRMF_LANES_INLINE F step(F acc, F v) const { return acc + v; }
  MRMF_LANES_INLINE F out(F s) const { return (0.f + s) * scale; }
  MRMF_LANES_INLINE F pair(F a, F b) const { return ((0.f + a) + b) * scale; }
  template <class G>
  MRMF_LANES_INLINE SumFold<G> as(G wide_scale) const {
    return {wide_scale};
  }
};
// log1p by products (kernels/log1p_products.h; FusedDownsample's
// products_out): (acc *) factor, then L(p) * inv, pairs L((1 * a) * b) * inv,
// L = log_of_count_product(., cells).
template <class F, bool kSigned>
struct ProductFold {
  static constexpr bool kProduct = true;  // its values are count factors
  F scale;
  int cells;
  MRMF_LANES_INLINE F step(F acc, F u) const { return acc * u; }
  MRMF_LANES_INLINE F out(F p) const { return lanes::log_of_count_product_any<kSigned>(p, cells) * scale; }
  MRMF_LANES_INLINE F pair(F a, F b) const { return out((1.f * a) * b); }
  template <class G>
  MRMF_LANES_INLINE ProductFold<G, kSigned> as(G wide_scale) const {
    return {wide_scale, cells};
  }
};

// Outputs [w0, w1) of the four-channel rows one by one: their tails, and
// the whole where the vector code is not compiled.
template <class Value, class Fold>
void out4_positions(const float* acc, const uint16_t* x, int64_t w0, int64_t w1, Value value, Fold fold, float* y,
                    int64_t ystride) {
  for (int64_t w = w0; w < w1; ++w)
    for (int64_t c = 0; c < 4; ++c) {
      const float t = value(x, 4 * w + c);
      y[c * ystride + w] = fold.out(acc ? fold.step(acc[4 * w + c], t) : t);
    }
}
// Outputs [w0, w1) of the pair rows (pair_sums4_*, products with f2 = 2)
// one by one: their tails, and the whole where the vector code is not
// compiled.
template <class Value, class Fold>
void pair4_positions(const float* acc, const uint16_t* x, Value value, Fold fold, int64_t w0, int64_t w1, float* y,
                     int64_t ystride) {
  const auto t = [&](int64_t k) { return acc ? fold.step(acc[k], value(x, k)) : value(x, k); };
  for (int64_t w = w0; w < w1; ++w)
    for (int64_t c = 0; c < 4; ++c) y[c * ystride + w] = fold.pair(t(8 * w + c), t(8 * w + 4 + c));
}

// product_rows4_avx512's and _avx2's outputs one by one, where no vector
// code is compiled.
inline void product_positions(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells,
                              int64_t wn, float* y, int64_t ystride, float inv) {
  const auto run = [&](auto sign) {
    constexpr bool kSigned = decltype(sign)::value;
    const ProductFold<float, kSigned> fold{inv, static_cast<int>(cells)};
    if (f2 == 2)
      pair4_positions(acc, x, Factor16<kSigned>{}, fold, 0, wn, y, ystride);
    else
      out4_positions(acc, x, 0, wn, Factor16<kSigned>{}, fold, y, ystride);
  };
  if (is_signed)
    run(std::true_type{});
  else
    run(std::false_type{});
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

// Calls row(first, is_signed, fold) as by_kind() does, with the
// ProductFold of a block of `cells` elements: product_rows4_*'s
// instantiations.
template <class Row>
void by_product_kind(const float* acc, bool is_signed, int64_t cells, float inv, const Row& row) {
  by_kind(acc, is_signed, [&](auto first, auto sign) {
    row(first, sign, ProductFold<float, decltype(sign)::value>{inv, static_cast<int>(cells)});
  });
}

// The two lines of a 128-byte step `bytes` ahead (none where bytes is 0).
inline void prefetch_step128(const uint16_t* xs, int64_t bytes) {
  if (bytes > 0) {
    prefetch_line(reinterpret_cast<const char*>(xs) + bytes);
    prefetch_line(reinterpret_cast<const char*>(xs) + bytes + 64);
  }
}

}  // namespace mrmf::kernels::quads
