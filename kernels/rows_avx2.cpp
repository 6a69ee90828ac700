// See kernels/rows_avx2.h.
#include "kernels/rows_avx2.h"

#include <atomic>

#include "kernels/rows_avx512.h"
#include "kernels/rows_quads.h"

namespace mrmf::kernels {

namespace {
using quads::Factor16;
using quads::out4_positions;
using quads::pair4_positions;
using quads::prefetch_step128;
using quads::SumFold;
using quads::Value16;

bool cpu_has_avx2() {
#if defined(MRMF_ROWS_AVX512)  // x86-64 with GCC-style builtins (kernels/rows_avx512.h)
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
#else
  return false;
#endif
}
std::atomic<bool>& switch_on() {
  static std::atomic<bool> on{true};
  return on;
}
}  // namespace

bool rows_avx2() { return cpu_has_avx2() && switch_on().load(std::memory_order_relaxed) && !rows_avx512(); }
void set_rows_avx2(bool on) { switch_on().store(on, std::memory_order_relaxed); }

namespace {
template <class T>
struct Same {
  using type = T;
};
// The pieces' entry: the AVX-512 function where rows_avx512(), else the
// AVX2 one where rows_avx2(); false (nothing run) where neither runs. The
// arguments' types come from the functions.
template <class... A>
bool run_simd(void (*avx512)(A...), void (*avx2)(A...), typename Same<A>::type... args) {
  if (rows_avx512())
    avx512(args...);
  else if (rows_avx2())
    avx2(args...);
  else
    return false;
  return true;
}
}  // namespace

bool convert_rows_out4_simd(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                            float inv, int64_t prefetch_bytes) {
  return run_simd(convert_rows_out4_avx512, convert_rows_out4_avx2, acc, x, is_signed, wn, y, ystride, inv,
                  prefetch_bytes);
}

bool pair_sums4_simd(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                     float inv, int64_t prefetch_bytes) {
  return run_simd(pair_sums4_avx512, pair_sums4_avx2, acc, x, is_signed, wn, y, ystride, inv, prefetch_bytes);
}

bool table_rows_out4_simd(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                          int64_t ystride, float inv, int64_t prefetch_bytes) {
  return run_simd(table_rows_out4_avx512, table_rows_out4_avx2, acc, x, wn, table, y, ystride, inv, prefetch_bytes);
}

bool product_rows4_simd(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                        float* y, int64_t ystride, float inv, int64_t prefetch_bytes) {
  return run_simd(product_rows4_avx512, product_rows4_avx2, acc, x, is_signed, f2, cells, wn, y, ystride, inv,
                  prefetch_bytes);
}

#if defined(MRMF_ROWS_AVX512)
namespace {
// Eight consecutive 16-bit inputs (two positions of four channels) as
// floats: [position p: c0 c1 c2 c3 | position p + 1: c0 c1 c2 c3]; the
// integers, or (kFactor) their count factors (kernels/log1p_lanes.h).
template <bool kSigned, bool kFactor = false>
__attribute__((target("avx2"))) __m256 two_positions(const uint16_t* x) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  const __m256i i = kSigned ? _mm256_cvtepi16_epi32(h) : _mm256_cvtepu16_epi32(h);
  if constexpr (kFactor)
    return lanes::count_factor_lanes<kSigned, lanes::F32x8>(reinterpret_cast<lanes::I32<lanes::F32x8>>(i));
  return _mm256_cvtepi32_ps(i);
}

// The same eight inputs' log1p from the table: scalar loads into the lanes,
// as g++ compiles the plain loop (AVX2's gathers were slower on counts,
// bench/results/cpu_data_2026-11-27e.txt; its permutes over the table's
// first 64 entries slower on a Milan VM, kernels/rows_avx512.h).
__attribute__((target("avx2"))) __m256 two_positions_table(const uint16_t* x, const float* t) {
  return _mm256_setr_ps(t[x[0]], t[x[1]], t[x[2]], t[x[3]], t[x[4]], t[x[5]], t[x[6]], t[x[7]]);
}

// Four registers of two positions each (v[k]: positions 2k and 2k + 1,
// channels-last, as two_positions() gives them) -> channel c of positions
// 0-7 in order, stored at y + c * ystride.
__attribute__((target("avx2"))) void store_transposed(const __m256* v, float* y, int64_t ystride) {
  const __m256 lo01 = _mm256_unpacklo_ps(v[0], v[1]);  // p0c0 p2c0 p0c1 p2c1 | p1c0 p3c0 p1c1 p3c1
  const __m256 hi01 = _mm256_unpackhi_ps(v[0], v[1]);  // p0c2 p2c2 p0c3 p2c3 | p1c2 p3c2 p1c3 p3c3
  const __m256 lo23 = _mm256_unpacklo_ps(v[2], v[3]);  // the same for positions 4-7
  const __m256 hi23 = _mm256_unpackhi_ps(v[2], v[3]);
  // Channel c as p0 p2 p4 p6 | p1 p3 p5 p7 (pairs of floats moved as
  // doubles), then in order.
  const __m256d l01 = _mm256_castps_pd(lo01), l23 = _mm256_castps_pd(lo23);
  const __m256d h01 = _mm256_castps_pd(hi01), h23 = _mm256_castps_pd(hi23);
  const __m256 ch[4] = {_mm256_castpd_ps(_mm256_unpacklo_pd(l01, l23)), _mm256_castpd_ps(_mm256_unpackhi_pd(l01, l23)),
                        _mm256_castpd_ps(_mm256_unpacklo_pd(h01, h23)), _mm256_castpd_ps(_mm256_unpackhi_pd(h01, h23))};
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int c = 0; c < 4; ++c) _mm256_storeu_ps(y + c * ystride, _mm256_permutevar8x32_ps(ch[c], order));
}

// Fold: quads::SumFold (the integers, or with kTable their log1p from
// `table`) or ProductFold (their count factors) on floats (the tail's),
// taken to eight lanes.
template <bool kFirst, bool kSigned, class Fold, bool kTable = false>
__attribute__((target("avx2"))) void out_rows4(const float* acc, const uint16_t* x, int64_t wn, Fold fold, float* y,
                                               int64_t ystride, int64_t prefetch_bytes, const float* table = nullptr) {
  constexpr bool kFactor = Fold::kProduct;
  static_assert(!(kTable && kFactor), "the table's values are summed");
  const auto wide = fold.as(lanes::F32x8(_mm256_set1_ps(fold.scale)));
  int64_t w = 0;
  for (; w + 8 <= wn; w += 8) {
    const uint16_t* xs = x + 4 * w;  // 64 bytes: one line
    if (prefetch_bytes > 0) prefetch_line(reinterpret_cast<const char*>(xs) + prefetch_bytes);
    __m256 v[4];
    for (int k = 0; k < 4; ++k) {
      __m256 t = kTable ? two_positions_table(xs + 8 * k, table) : two_positions<kSigned, kFactor>(xs + 8 * k);
      if (!kFirst) t = wide.step(_mm256_loadu_ps(acc + 4 * w + 8 * k), t);
      v[k] = wide.out(t);
    }
    store_transposed(v, y + w, ystride);
  }
  if constexpr (kFactor)
    out4_positions(kFirst ? nullptr : acc, x, w, wn, Factor16<kSigned>{}, fold, y, ystride);
  else
    out4_positions(kFirst ? nullptr : acc, x, w, wn, Value16{table, kSigned}, fold, y, ystride);
}

template <bool kFirst, bool kSigned, class Fold>
__attribute__((target("avx2"))) void pair_rows4(const float* acc, const uint16_t* x, int64_t wn, Fold fold, float* y,
                                                int64_t ystride, int64_t prefetch_bytes) {
  constexpr bool kFactor = Fold::kProduct;
  const auto wide = fold.as(lanes::F32x8(_mm256_set1_ps(fold.scale)));
  int64_t w = 0;
  for (; w + 8 <= wn; w += 8) {
    const uint16_t* xs = x + 8 * w;  // 16 positions of 4 inputs: 128 bytes, two lines
    prefetch_step128(xs, prefetch_bytes);
    __m256 t[8];  // t[j]: output j's two positions, one per 128-bit lane
    for (int j = 0; j < 8; ++j) {
      t[j] = two_positions<kSigned, kFactor>(xs + 8 * j);
      if (!kFirst) t[j] = wide.step(_mm256_loadu_ps(acc + 8 * w + 8 * j), t[j]);
    }
    __m256 s[4];  // outputs 2k and 2k + 1, channels-last, from the first position and the second
    for (int k = 0; k < 4; ++k) {
      const __m256 first = _mm256_permute2f128_ps(t[2 * k], t[2 * k + 1], 0x20);
      const __m256 second = _mm256_permute2f128_ps(t[2 * k], t[2 * k + 1], 0x31);
      s[k] = wide.pair(first, second);
    }
    store_transposed(s, y + w, ystride);
  }
  if constexpr (kFactor)
    pair4_positions(kFirst ? nullptr : acc, x, Factor16<kSigned>{}, fold, w, wn, y, ystride);
  else
    pair4_positions(kFirst ? nullptr : acc, x, Value16{nullptr, kSigned}, fold, w, wn, y, ystride);
}
}  // namespace

void convert_rows_out4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y,
                            int64_t ystride, float inv, int64_t prefetch_bytes) {
  quads::by_kind(acc, is_signed, [&](auto first, auto sign) {
    out_rows4<decltype(first)::value, decltype(sign)::value>(acc, x, wn, SumFold<float>{inv}, y, ystride,
                                                             prefetch_bytes);
  });
}

void table_rows_out4_avx2(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                          int64_t ystride, float inv, int64_t prefetch_bytes) {
  if (acc)
    out_rows4<false, false, SumFold<float>, true>(acc, x, wn, SumFold<float>{inv}, y, ystride, prefetch_bytes, table);
  else
    out_rows4<true, false, SumFold<float>, true>(acc, x, wn, SumFold<float>{inv}, y, ystride, prefetch_bytes, table);
}

void pair_sums4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                     float inv, int64_t prefetch_bytes) {
  quads::by_kind(acc, is_signed, [&](auto first, auto sign) {
    pair_rows4<decltype(first)::value, decltype(sign)::value>(acc, x, wn, SumFold<float>{inv}, y, ystride,
                                                              prefetch_bytes);
  });
}

void product_rows4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                        float* y, int64_t ystride, float inv, int64_t prefetch_bytes) {
  quads::by_product_kind(acc, is_signed, cells, inv, [&](auto first, auto sign, auto fold) {
    constexpr bool kFirst = decltype(first)::value, kSigned = decltype(sign)::value;
    if (f2 == 2)
      pair_rows4<kFirst, kSigned>(acc, x, wn, fold, y, ystride, prefetch_bytes);
    else
      out_rows4<kFirst, kSigned>(acc, x, wn, fold, y, ystride, prefetch_bytes);
  });
}
#else
void convert_rows_out4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y,
                            int64_t ystride, float inv, int64_t) {
  // Never chosen here (rows_avx2() is false); the plain loop, for safety.
  out4_positions(acc, x, 0, wn, Value16{nullptr, is_signed}, SumFold<float>{inv}, y, ystride);
}
void pair_sums4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                     float inv, int64_t) {
  // Never chosen here (rows_avx2() is false); the plain loop, for safety.
  pair4_positions(acc, x, Value16{nullptr, is_signed}, SumFold<float>{inv}, 0, wn, y, ystride);
}
void table_rows_out4_avx2(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                          int64_t ystride, float inv, int64_t) {
  // Never chosen here (rows_avx2() is false); the plain loop, for safety.
  out4_positions(acc, x, 0, wn, Value16{table, false}, SumFold<float>{inv}, y, ystride);
}
void product_rows4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                        float* y, int64_t ystride, float inv, int64_t) {
  // Never chosen here (rows_avx2() is false); the plain loop, for safety.
  quads::product_positions(acc, x, is_signed, f2, cells, wn, y, ystride, inv);
}
#endif

}  // namespace mrmf::kernels
