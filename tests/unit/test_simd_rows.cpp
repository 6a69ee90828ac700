// The fused downsample's vector rows on the CPU (kernels/rows_avx512.h,
// kernels/rows_avx2.h): each hand-written piece gives the plain loops' bits
// (and the functors', the GPU math's), directly against a formula and
// through the whole kernel, with AVX-512 on, off, and AVX2 off.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/fused_downsample_chain.h"
#include "kernels/fused_downsample_ops.h"
#include "kernels/rows_avx2.h"
#include "kernels/rows_avx512.h"
#include "support/fused_functors.h"
#include "support/simd_rows.h"

using namespace mrmf;
using namespace mrmf::kernels;
using namespace mrmf::kernels::test;

namespace {

// check_simd_kernel() with the functors on CosmoFlow-like cubes
// [2, d, h, width, 4] of each 16-bit type (float16 as a control: it takes
// none of the integer rows), for each transform (a per-channel scale and
// shift for Scale) and list of levels.
void check_cosmo_simd_kernel(int64_t d, int64_t h, std::initializer_list<int64_t> widths, uint64_t seed,
                             std::initializer_list<FusedTransform> transforms,
                             const std::vector<std::vector<std::vector<int64_t>>>& level_lists) {
  for (DType dt : {DType::U16, DType::I16, DType::F16})
    for (FusedTransform tf : transforms)
      for (int64_t width : widths)
        for (const auto& levels : level_lists) {
          INFO(dtype_name(dt) << ", transform " << static_cast<int>(tf) << ", width " << width << ", " << levels.size()
                              << " levels, first " << levels[0][0] << "x" << levels[0][1] << "x" << levels[0][2]);
          FusedDownsampleSpec spec;
          spec.layout = InputLayout::ChannelsLast;
          spec.transform = tf;
          if (tf == FusedTransform::Scale) {
            // (Move-assigned: assigning the braced lists drew GCC 12's -Wnonnull false positive.)
            spec.scale = std::vector<float>{0.5f, -2.f, 3.f, 0.25f};
            spec.shift = std::vector<float>{1.f, 0.f, -0.25f, 2.f};
          }
          spec.levels = levels;
          check_simd_kernel(raw_tensor({2, d, h, width, 4}, dt, seed), spec, true);
        }
}

// The four-channel 16-bit rows (convert_rows_out4_*, pair_sums4_*: the
// AVX-512 and AVX2 pieces share a signature and formulas).
using Quads16Row = void (*)(const float*, const uint16_t*, bool, int64_t, float*, int64_t, float, int64_t);

// A convert_rows_out4_* row directly, against the formula: position counts
// around the 8- and 16-position steps, a channel stride that is not the row
// length (nothing written between channels), the types' extremes, a block's
// only row or its last after others (acc), with and without the prefetch;
// uint16 and int16 read from the same bits.
void check_convert_rows_out4(Quads16Row row) {
  for (bool is_signed : {false, true})
    for (int64_t wn : {0, 1, 15, 16, 17, 33, 203})
      for (bool first : {true, false})
        for (int64_t prefetch : {0, 4096}) {
          INFO((is_signed ? "int16" : "uint16") << ", wn " << wn << ", first " << first << ", prefetch " << prefetch);
          const int64_t ystride = wn + 3;
          const std::vector<uint16_t> x = extreme_bits(static_cast<size_t>(4 * wn), 7);
          const std::vector<float> acc = ramp_acc(x.size());
          const auto value = [&](size_t k) { return int16_value(x[k], is_signed); };
          std::vector<float> y(static_cast<size_t>(4 * ystride), 7.f), want(y.size(), 7.f);
          for (int64_t w = 0; w < wn; ++w)
            for (int c = 0; c < 4; ++c) {
              const size_t k = static_cast<size_t>(4 * w + c);
              want[c * ystride + w] = (0.f + (first ? value(k) : acc[k] + value(k))) * (1.f / 3.f);
            }
          row(first ? nullptr : acc.data(), x.data(), is_signed, wn, y.data(), ystride, 1.f / 3.f, prefetch);
          CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
        }
}

// A pair_sums4_* row directly, against the formula: output counts around
// the 8-output steps, a channel stride that is not the row length (nothing
// written between channels), the types' extremes (sums past 16 bits,
// negative ones, and pairs that cancel), uint16 and int16 read from the
// same bits, a block's only row or its last after others.
void check_pair_sums4(Quads16Row row) {
  for (bool is_signed : {false, true})
    for (int64_t wn : {0, 1, 7, 8, 9, 17, 203}) {
      INFO((is_signed ? "int16" : "uint16") << ", wn " << wn);
      const int64_t ystride = wn + 3;
      std::vector<uint16_t> x = extreme_bits(static_cast<size_t>(8 * wn), 9);
      for (int64_t w = 0; w < wn; w += 5) x[8 * w + 5] = static_cast<uint16_t>(-static_cast<int16_t>(x[8 * w + 1]));
      const auto value = [&](size_t k) { return int16_value(x[k], is_signed); };
      std::vector<float> y(static_cast<size_t>(4 * ystride), 7.f), want(y.size(), 7.f);
      for (int64_t w = 0; w < wn; ++w)
        for (int c = 0; c < 4; ++c)
          want[c * ystride + w] = ((0.f + value(8 * w + c)) + value(8 * w + 4 + c)) * (1.f / 3.f);
      row(nullptr, x.data(), is_signed, wn, y.data(), ystride, 1.f / 3.f, 0);
      CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      // As a block's last row after others: acc + value per position first.
      const std::vector<float> acc = ramp_acc(x.size());
      std::fill(want.begin(), want.end(), 7.f);
      for (int64_t w = 0; w < wn; ++w)
        for (int c = 0; c < 4; ++c) {
          const size_t k = static_cast<size_t>(8 * w + c);
          want[c * ystride + w] = ((0.f + (acc[k] + value(k))) + (acc[k + 4] + value(k + 4))) * (1.f / 3.f);
        }
      for (int64_t prefetch : {0, 4096}) {
        INFO("after other rows, prefetch " << prefetch);
        std::fill(y.begin(), y.end(), 7.f);
        row(acc.data(), x.data(), is_signed, wn, y.data(), ystride, 1.f / 3.f, prefetch);
        CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
    }
}

// n 16-bit inputs for the table rows: pattern 0 every value below 64 (the
// AVX-512 rows' entries in registers), 1 around 64 (62-65), 2 a rare large
// count among small ones, 3 uniform (the AVX-512 rows' gathers).
std::vector<uint16_t> table_test_bits(int64_t n, int pattern) {
  std::vector<uint16_t> x(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t h = static_cast<uint32_t>(k * 2654435761u >> 7);
    x[k] = pattern == 0   ? static_cast<uint16_t>(h % 64)
           : pattern == 1 ? static_cast<uint16_t>(62 + h % 4)
           : pattern == 2 ? static_cast<uint16_t>(h % 100 == 0 ? 65535 : h % 40)
                          : static_cast<uint16_t>(h);
  }
  return x;
}

// A table_rows_out4_* row (log1p from the table, a block's last or only row
// of four channels, f2 = 1) directly against the formula, straight into
// channel-major outputs: position counts around the 8- and 16-lane steps,
// each input pattern, a first row or after others, with and without the
// prefetch; nothing written past a channel.
using TableOut4Row = void (*)(const float*, const uint16_t*, int64_t, const float*, float*, int64_t, float, int64_t);
void check_table_rows_out4(TableOut4Row row) {
  const float* table = log1p_table(RawType::U16);
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 200, 2048})
    for (int pattern = 0; pattern < 4; ++pattern)
      for (bool first : {true, false}) {
        INFO("n " << n << ", pattern " << pattern << ", first " << first);
        const std::vector<uint16_t> x = table_test_bits(n, pattern);
        const int64_t ystride = n + 3;
        std::vector<uint16_t> x4(static_cast<size_t>(4 * n));
        for (int64_t k = 0; k < 4 * n; ++k) x4[k] = x[k % std::max<int64_t>(n, 1)] ^ static_cast<uint16_t>(k & 3);
        std::vector<float> acc4(static_cast<size_t>(4 * n));
        for (int64_t k = 0; k < 4 * n; ++k) acc4[k] = 0.5f * static_cast<float>(k % 5) - 1.f;
        std::vector<float> want4(static_cast<size_t>(4 * ystride), 7.f);
        for (int64_t w = 0; w < n; ++w)
          for (int c = 0; c < 4; ++c) {
            const float t = table[x4[4 * w + c]];
            want4[c * ystride + w] = (0.f + (first ? t : acc4[4 * w + c] + t)) * (1.f / 3.f);
          }
        for (int64_t prefetch : {0, 4096}) {
          INFO("prefetch " << prefetch);
          std::vector<float> y4(want4.size(), 7.f);
          row(first ? nullptr : acc4.data(), x4.data(), n, table, y4.data(), ystride, 1.f / 3.f, prefetch);
          CHECK(std::memcmp(y4.data(), want4.data(), y4.size() * sizeof(float)) == 0);
        }
      }
}

// The whole kernel on CosmoFlow-like cubes [N, D, H, W, 4] for the
// four-channel rows with last-axis factor 1: levels 1/1, 1/2 along x,
// 2x2x1, and as the first level of the ladder and of three levels (the
// hand-written rows take the last row of a block of several), rows of 16 or
// 21 positions (merged over H where f1 = 1: 64 or 84 positions, a tail of
// 4; 2x2x1: 16 or 21, a tail of 5), each 16-bit type and the transforms
// that take the plain rows: every piece and the functors' traversal.
void check_cosmo_quads_f2_1() {
  check_cosmo_simd_kernel(
      4, 4, {16, 21}, 29, {FusedTransform::None, FusedTransform::Scale},
      {{{1, 1, 1}}, {{2, 1, 1}}, {{2, 2, 1}}, {{2, 1, 1}, {2, 2, 1}}, {{1, 1, 1}, {2, 2, 1}, {4, 4, 1}}});
}

// The same for the pair sums: 1/2 along the last axis alone, and as the
// first level of a ladder with 1/8 derived from it (rows merged over H, 48
// or 54 outputs, a tail of 6); 1/8 and 1x2x2, whose last rows come after
// others (8 or 9 outputs, a tail of 1); each 16-bit type and transform.
void check_cosmo_quads_pairs() {
  check_cosmo_simd_kernel(2, 6, {16, 18}, 23, {FusedTransform::None, FusedTransform::Scale, FusedTransform::Log1p},
                          {{{1, 1, 2}}, {{1, 1, 2}, {2, 2, 2}}, {{2, 2, 2}}, {{1, 2, 2}}});
}
}  // namespace

TEST_CASE("fused downsample: the AVX-512 table rows give the plain loop's bits", "[fused_downsample]") {
  SKIP_WITHOUT_AVX512_ROWS("the table rows take the plain loop only");
  const SimdRowsKept restore;
  set_rows_avx512(false);
  CHECK_FALSE(rows_avx512());
  set_rows_avx512(true);
  CHECK(rows_avx512());
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    // (Empty rows have no data pointer, which memcmp must not get: UBSan.)
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  };
  // The rows themselves against the plain loop: lengths around the 16-lane
  // groups, values on both sides of the in-register entries (63 / 64), groups
  // that are all small, all large, or mixed, and a first row or a later one.
  const float* table = log1p_table(RawType::U16);
  for (int64_t n : {0, 1, 15, 16, 17, 31, 33, 200, 2048})
    for (int pattern = 0; pattern < 4; ++pattern)
      for (bool first : {true, false}) {
        INFO("n " << n << ", pattern " << pattern << ", first " << first);
        const std::vector<uint16_t> x = table_test_bits(n, pattern);
        std::vector<float> acc(static_cast<size_t>(n)), want(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) acc[k] = want[k] = 0.25f * static_cast<float>(k % 7);
        table_rows_add_avx512(acc.data(), x.data(), n, table, first);
        for (int64_t k = 0; k < n; ++k) want[k] = first ? table[x[k]] : want[k] + table[x[k]];
        CHECK(same_bits(acc, want));
      }
  check_table_rows_out4(table_rows_out4_avx512);
  // The whole kernel, with and without the vector rows, on count-like cubes
  // (a few large counts among small ones) for each 16-bit type and layout.
  // Rows of 21 positions where f1 = 2: a 16-lane step and a tail (where
  // every f1 = 1 the kernel merges rows over H: 168 positions, a tail of 8;
  // the tails of a block's only row are covered directly above).
  for (DType dt : {DType::U16, DType::I16, DType::F16})
    for (bool channels_last : {true, false})
      for (int64_t width : {16, 21})
        for (bool product : {false, true}) {
          if (product && dt == DType::F16) continue;  // no products for float16
          INFO(dtype_name(dt) << (channels_last ? ", channels-last" : ", channels-first") << ", width " << width
                              << (product ? ", products" : ", table sums"));
          Tensor raw = Tensor::empty(channels_last ? Shape{2, 8, 8, width, 4} : Shape{2, 4, 8, 8, width}, dt);
          auto* p = static_cast<uint16_t*>(raw.raw_data());
          for (int64_t i = 0; i < raw.numel(); ++i) {
            const uint32_t h = static_cast<uint32_t>(i * 2654435761u >> 9);
            p[i] = static_cast<uint16_t>(h % 211 == 0 ? 300 + h % 1000 : h % 24);
          }
          FusedDownsampleSpec spec;
          spec.layout = channels_last ? InputLayout::ChannelsLast : InputLayout::ChannelsFirst;
          spec.transform = FusedTransform::Log1p;
          spec.log1p_product = product;  // products: the logarithms of 2x2x2 blocks, 16 at a time
          // Several levels (the later ones derived from 1/1's outputs) and
          // single levels, whose blocks of several rows accumulate the table's
          // values (the permutes' path with acc + value).
          for (const auto& levels : std::vector<std::vector<std::vector<int64_t>>>{
                   {{1, 1, 1}, {2, 1, 1}, {2, 2, 2}, {1, 1, 4}}, {{2, 2, 2}}, {{1, 2, 1}}, {{2, 1, 1}}, {{1, 1, 3}}}) {
            if (std::any_of(levels.begin(), levels.end(), [&](const auto& f) { return width % f[2] != 0; })) continue;
            INFO(levels.size() << " levels, first " << levels[0][0] << "x" << levels[0][1] << "x" << levels[0][2]);
            spec.levels = levels;
            check_simd_kernel(raw, spec, false);
          }
        }
}

TEST_CASE("fused downsample: the AVX-512 pair sums of three channels give the plain loops' and the functors' bits",
          "[fused_downsample]") {
  SKIP_WITHOUT_AVX512_ROWS("the pair sums take the plain loops only");
  const SimdRowsKept restore;
#if defined(MRMF_ROWS_AVX512)  // declared on x86-64 with GCC-compatible compilers only
  const auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  };
  // Directly, against the formula: output counts around the 16-lane steps,
  // a channel stride that is not the row length, and signed zeros (the sum
  // starts from +0, so -0 + -0 must come out +0, as the GPU's does).
  for (int64_t wn : {0, 1, 15, 16, 17, 33, 341}) {
    INFO("wn " << wn);
    const int64_t ystride = wn + 5;
    std::vector<float> acc(static_cast<size_t>(6 * wn));
    for (size_t k = 0; k < acc.size(); ++k)
      acc[k] = (k / 6) % 5 == 0 && k % 3 == 0  // both neighbours of channel 0 at every fifth output
                   ? -0.f
                   : static_cast<float>(static_cast<int>(k * 2654435761u >> 20) % 1000) * 0.37f - 150.f;
    std::vector<float> y(static_cast<size_t>(3 * ystride), 7.f), want = y;
    for (int64_t w = 0; w < wn; ++w)
      for (int c = 0; c < 3; ++c) want[c * ystride + w] = ((0.f + acc[6 * w + c]) + acc[6 * w + 3 + c]) * 0.5f;
    pair_sums3_avx512(acc.data(), wn, y.data(), ystride, 0.5f);
    for (size_t k = 0; k < y.size(); ++k)
      if (bits(y[k]) != bits(want[k])) FAIL_CHECK("output " << k << ": " << y[k] << ", want " << want[k]);
  }
#endif
  // The whole kernel on Neuron Inverter series [N, T, 3] (T / 2 alone and
  // with T / 4; 800 outputs span three accumulator segments, 18 are a
  // 16-lane step and a tail), every stored type and transform: AVX-512 on
  // and off, and the functors' traversal.
  for (DType dt : {DType::F32, DType::F16, DType::I16, DType::U16})
    for (FusedTransform tf : {FusedTransform::None, FusedTransform::Scale, FusedTransform::Log1p})
      for (int64_t t : {36, 1600})
        for (bool with_quarter : {false, true}) {
          INFO(dtype_name(dt) << ", transform " << static_cast<int>(tf) << ", T " << t
                              << (with_quarter ? ", 1/2 + 1/4" : ""));
          Tensor raw = raw_tensor({3, t, 3}, dt, 17);
          FusedDownsampleSpec spec;
          spec.transform = tf;
          if (tf == FusedTransform::Scale) {
            spec.scale = {0.5f, -2.f, 3.f};
            spec.shift = {1.f, 0.f, -0.25f};
          }
          spec.levels =
              with_quarter ? std::vector<std::vector<int64_t>>{{2}, {4}} : std::vector<std::vector<int64_t>>{{2}};
          check_simd_kernel(raw, spec, true);
        }
}

TEST_CASE("fused downsample: the AVX-512 four-channel rows without a transform give the plain loops' bits",
          "[fused_downsample]") {
  SKIP_WITHOUT_AVX512_ROWS("the rows take the plain loops only");
  const SimdRowsKept restore;
  check_convert_rows_out4(convert_rows_out4_avx512);
  check_cosmo_quads_f2_1();
}

TEST_CASE(
    "fused downsample: the AVX-512 pair sums of four 16-bit channels give the formula's and the plain loops' bits",
    "[fused_downsample]") {
  SKIP_WITHOUT_AVX512_ROWS("the pair sums take the plain loops only");
  const SimdRowsKept restore;
  check_pair_sums4(pair_sums4_avx512);
  check_cosmo_quads_pairs();
}

TEST_CASE("fused downsample: the AVX2 four-channel rows and pair sums give the formula's and the plain loops' bits",
          "[fused_downsample]") {
  const SimdRowsKept restore;
  if (!use_avx2_rows()) {
    WARN("no AVX2 on this CPU: the four-channel rows take the plain loops only");
    return;
  }
  check_convert_rows_out4(convert_rows_out4_avx2);
  check_pair_sums4(pair_sums4_avx2);
  check_table_rows_out4(table_rows_out4_avx2);
  // The whole kernel: where the AVX-512 rows are on, the test cases above
  // have run it with every piece (check_simd_kernel), AVX2 included.
  if (!restore.avx512) {
    check_cosmo_quads_f2_1();
    check_cosmo_quads_pairs();
    // log1p from the table, last-axis factor 1: 1/1 (a block's only row),
    // 1/2 along x and 2x2x1 summed (their last rows after others), and the
    // ladder's first level.
    FusedDownsampleSpec spec;
    spec.layout = InputLayout::ChannelsLast;
    spec.transform = FusedTransform::Log1p;
    spec.log1p_product = false;
    for (const auto& levels : std::vector<std::vector<std::vector<int64_t>>>{
             {{1, 1, 1}}, {{2, 1, 1}}, {{2, 2, 1}}, {{2, 1, 1}, {2, 2, 2}}}) {
      spec.levels = levels;
      for (DType dt : {DType::U16, DType::I16, DType::F16})
        for (int64_t width : {16, 18, 21}) {
          if (width % levels.back()[2] != 0) continue;  // the ladder's 1/8
          INFO(dtype_name(dt) << ", width " << width << ", first level " << levels[0][0] << "x" << levels[0][1]);
          check_simd_kernel(raw_tensor({2, 4, 4, width, 4}, dt, 31), spec, true);
        }
    }
  }
}
