// The four-channel product rows (kernels/rows_avx512.h piece 5 and its AVX2
// version): the last row of a block of CosmoFlow's 16-bit counts reduced
// by products under log1p, against the formula written here from the
// scalar rule (kernels/log1p_products.h), and the whole kernel with and
// without them against the functors (the GPU's math).
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/log1p_products.h"
#include "support/fused_functors.h"
#include "support/simd_rows.h"

using namespace mrmf;
using namespace mrmf::kernels;
using namespace mrmf::kernels::test;

namespace {

using ProductRow = void (*)(const float*, const uint16_t*, bool, int64_t, int64_t, int64_t, float*, int64_t, float,
                            int64_t);

// Count-like 16-bit inputs: small counts, zeros, the types' extremes
// (0xFFFF: uint16's largest, int16's -1, a zero factor; 0x8000: int16's
// most negative, a NaN factor; 0x7FFF) about three in every `period`.
std::vector<uint16_t> count_bits(size_t n, uint32_t period) {
  std::vector<uint16_t> x = extreme_bits(n, period);
  for (size_t k = 0; k < n; ++k)
    if (x[k] != 0xFFFF && x[k] != 0x8000 && x[k] != 0x7FFF) x[k] = static_cast<uint16_t>(x[k] % 3 == 0 ? 0 : x[k] % 61);
  return x;
}

// The accumulated product of a block's earlier rows: positive factors'
// products; for int16 also a zero (an earlier -1) and a NaN (an earlier
// value below -1) now and then.
std::vector<float> product_acc(size_t n, bool is_signed) {
  std::vector<float> acc(n);
  for (size_t k = 0; k < n; ++k) {
    acc[k] =
        count_factor<false>(static_cast<uint32_t>(k * 37 % 300)) * count_factor<false>(static_cast<uint32_t>(k % 7));
    if (is_signed && k % 29 == 3) acc[k] = 0.f;
    if (is_signed && k % 31 == 5) acc[k] = std::numeric_limits<float>::quiet_NaN();
  }
  return acc;
}

// A product row directly, against the formula: f2 = 1 (one position per
// output) and 2 (pairs along the last axis), output counts around the 8-
// and 16-lane steps, a channel stride that is not the row length (nothing
// written between channels), blocks of 4, 8 and 15 cells (the factors'
// scale), a block's only row or its last after others, with and without
// the prefetch; uint16 and int16 from the same bits.
void check_product_row(ProductRow row) {
  const auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (bool is_signed : {false, true})
    for (int64_t f2 : {1, 2})
      for (int64_t wn : {0, 1, 7, 8, 9, 15, 16, 17, 33, 203})
        for (int64_t cells : {4, 8, 15})
          for (bool first : {true, false}) {
            INFO((is_signed ? "int16" : "uint16")
                 << ", f2 " << f2 << ", wn " << wn << ", cells " << cells << ", first " << first);
            const int64_t ystride = wn + 3;
            const std::vector<uint16_t> x = count_bits(static_cast<size_t>(4 * f2 * wn), 7);
            const std::vector<float> acc = product_acc(x.size(), is_signed);
            const auto t = [&](size_t k) {
              const float u = is_signed ? count_factor<true>(x[k]) : count_factor<false>(x[k]);
              return first ? u : acc[k] * u;
            };
            const auto log_of = [&](float p) {
              return is_signed ? log_of_count_product<true>(p, cells) : log_of_count_product<false>(p, cells);
            };
            const float inv = 1.f / static_cast<float>(cells);
            std::vector<float> want(static_cast<size_t>(4 * ystride), 7.f);
            for (int64_t w = 0; w < wn; ++w)
              for (int c = 0; c < 4; ++c) {
                const size_t k = static_cast<size_t>(4 * f2 * w + c);
                const float p = f2 == 1 ? t(k) : (1.f * t(k)) * t(k + 4);
                want[c * ystride + w] = log_of(p) * inv;
              }
            for (int64_t prefetch : {0, 4096}) {
              INFO("prefetch " << prefetch);
              std::vector<float> y(want.size(), 7.f);
              row(first ? nullptr : acc.data(), x.data(), is_signed, f2, cells, wn, y.data(), ystride, inv, prefetch);
              CHECK(bits_equal(y, want));
            }
          }
}

// Count-like cubes [2, d, h, width, 4] (int16: a -1 now and then, a zero
// factor; rarely -2, a NaN), every level whose blocks the products take with
// last-axis factor 1 or 2 -- alone, or first of several -- and blocks of 10,
// 12 and 15 cells (the largest scale), with and without the vector rows,
// against the functors.
void check_product_kernel() {
  using Levels = std::vector<std::vector<int64_t>>;
  const std::vector<std::pair<std::array<int64_t, 2>, std::vector<Levels>>> cases = {
      {{4, 4},
       {{{2, 2, 1}},
        {{2, 2, 2}},
        {{1, 2, 2}},
        {{2, 1, 2}},
        {{4, 1, 1}},
        {{4, 2, 2}},
        {{2, 2, 1}, {4, 4, 1}},
        {{2, 2, 2}, {4, 4, 2}},
        {{1, 1, 1}, {2, 2, 1}, {2, 2, 2}}}},
      {{6, 5}, {{{3, 5, 1}}, {{1, 5, 2}}, {{6, 1, 2}}}}};
  for (DType dt : {DType::U16, DType::I16})
    for (const auto& [dh, level_lists] : cases)
      for (int64_t width : {16, 18, 42}) {
        Tensor raw = Tensor::empty({2, dh[0], dh[1], width, 4}, dt);
        auto* p = static_cast<uint16_t*>(raw.raw_data());
        for (int64_t i = 0; i < raw.numel(); ++i) {
          const uint32_t h = static_cast<uint32_t>(i * 2654435761u >> 9);
          p[i] = static_cast<uint16_t>(h % 211 == 0 ? 300 + h % 60000 : h % 24);
          if (dt == DType::I16 && h % 97 == 1) p[i] = static_cast<uint16_t>(h % 5 == 0 ? -2 : -1);
        }
        for (const Levels& levels : level_lists) {
          INFO(dtype_name(dt) << ", " << dh[0] << "x" << dh[1] << "x" << width << ", " << levels.size()
                              << " levels, first " << levels[0][0] << "x" << levels[0][1] << "x" << levels[0][2]);
          FusedDownsampleSpec spec;
          spec.layout = InputLayout::ChannelsLast;
          spec.transform = FusedTransform::Log1p;
          spec.levels = levels;
          check_simd_kernel(raw, spec, true);
        }
      }
}

}  // namespace

TEST_CASE("fused downsample: the AVX-512 product rows of four 16-bit channels give the formula's bits",
          "[fused_downsample]") {
  SKIP_WITHOUT_AVX512_ROWS("the product rows take the plain loops only");
  const SimdRowsKept restore;
  check_product_row(product_rows4_avx512);
  check_product_kernel();  // the plain loops, the AVX2 pieces and AVX-512
}

TEST_CASE("fused downsample: the AVX2 product rows of four 16-bit channels give the formula's bits",
          "[fused_downsample]") {
  const SimdRowsKept restore;
  if (!use_avx2_rows()) {
    WARN("no AVX2 on this CPU: the product rows take the plain loops only");
    return;
  }
  check_product_row(product_rows4_avx2);
  if (!restore.avx512) check_product_kernel();  // else the case above has run it with every piece
}
