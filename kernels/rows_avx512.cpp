// See kernels/rows_avx512.h.
#include "kernels/rows_avx512.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/prefetch.h"
#include "kernels/rows_avx2.h"
#include "kernels/rows_quads.h"

namespace mrmf::kernels {

namespace {
using quads::Factor16;
using quads::out4_positions;
using quads::pair4_positions;
using quads::prefetch_step128;
using quads::SumFold;
using quads::Value16;

bool cpu_has_avx512f() {
#if defined(MRMF_ROWS_AVX512)
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}
// MRMF_CPU_AVX512: unset, empty or "1" on, "0" off; anything else is
// reported by check_rows_avx512_env() (here: on).
int env_switch() {
  const char* e = std::getenv("MRMF_CPU_AVX512");
  if (!e || !*e || !std::strcmp(e, "1")) return 1;
  return !std::strcmp(e, "0") ? 0 : -1;
}
// A function-local static: read once, on first use, whatever the order in
// which translation units are initialized.
std::atomic<bool>& switch_on() {
  static std::atomic<bool> on{env_switch() != 0};
  return on;
}
}  // namespace

bool rows_avx512() { return cpu_has_avx512f() && switch_on().load(std::memory_order_relaxed); }
void set_rows_avx512(bool on) { switch_on().store(on, std::memory_order_relaxed); }

void check_rows_avx512_env() {
  MRMF_CHECK_KIND(Usage, env_switch() >= 0, "MRMF_CPU_AVX512='", std::getenv("MRMF_CPU_AVX512"),
                  "': expected 0 (the plain loops) or 1 (AVX-512 where the CPU has it, the default)");
}

std::string rows_avx512_description() {
  // Without AVX-512 the AVX2 pieces (kernels/rows_avx2.h) take two of its rows.
  const std::string other = rows_avx2() ? "plain loops, AVX2 for four 16-bit channels" : "plain loops";
  if (!cpu_has_avx512f()) return other + " (this CPU has no AVX-512F)";
  return rows_avx512() ? "AVX-512 (MRMF_CPU_AVX512=0 turns it off)" : other + " (AVX-512 off: MRMF_CPU_AVX512=0)";
}

#if defined(MRMF_ROWS_AVX512)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge
// operand, which -Wmaybe-uninitialized then reports at every use (a known
// false positive of the headers, not of this code).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
// The table with its entries 0-63 in four registers: 0-31 in (t[0], t[1]),
// 32-63 in (t[2], t[3]); permutex2var picks from a register pair by the
// index's low five bits, bit 5 chooses the pair.
struct Table64 {
  const float* table;
  __m512 t[4];
  __attribute__((target("avx512f"))) explicit Table64(const float* tab) : table(tab) {
    for (int j = 0; j < 4; ++j) t[j] = _mm512_loadu_ps(tab + 16 * j);
  }
  // Sixteen log1p values for the lanes of idx; `small`: every lane below 64.
  // A branch, not a masked gather of the large lanes: a gather costs about
  // as much with an empty mask (measured: 2.7 against 8.1 G lookups/s on
  // one core), and on counts the branch is nearly always taken.
  __attribute__((target("avx512f"))) __m512 lookup16(__m512i idx, bool small) const {
    if (__builtin_expect(small, 1)) {
      const __m512 lo = _mm512_permutex2var_ps(t[0], idx, t[1]), hi = _mm512_permutex2var_ps(t[2], idx, t[3]);
      return _mm512_mask_blend_ps(_mm512_test_epi32_mask(idx, _mm512_set1_epi32(32)), lo, hi);
    }
    return _mm512_i32gather_ps(idx, table, 4);
  }
};

template <bool kFirst>
__attribute__((target("avx512f"))) void add_rows(float* acc, const uint16_t* x, int64_t n, const float* table,
                                                 int64_t prefetch_bytes) {
  const Table64 tab(table);
  const __m512i above63 = _mm512_set1_epi32(~63);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    // One line (32 inputs) per two steps, as prefetch_ahead() does.
    if (prefetch_bytes > 0 && (k & 31) == 0) prefetch_line(reinterpret_cast<const char*>(x + k) + prefetch_bytes);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k)));
    const __m512 v = tab.lookup16(idx, _mm512_test_epi32_mask(idx, above63) == 0);
    _mm512_storeu_ps(acc + k, kFirst ? v : _mm512_add_ps(_mm512_loadu_ps(acc + k), v));
  }
  for (; k < n; ++k) acc[k] = kFirst ? table[x[k]] : acc[k] + table[x[k]];
}

// The values of sixteen 16-bit inputs at once for out_rows4: log1p from
// the table, or the integers (int16 where kSigned).
struct TableLanes {
  Table64 tab;
  __attribute__((target("avx512f"))) explicit TableLanes(const float* table) : tab(table) {}
  __attribute__((target("avx512f"))) static __m512i widen(__m256i h) { return _mm512_cvtepu16_epi32(h); }
  __attribute__((target("avx512f"))) void values(const __m512i* idx, __m512* v) const {
    const __m512i any = _mm512_or_si512(_mm512_or_si512(idx[0], idx[1]), _mm512_or_si512(idx[2], idx[3]));
    const bool small = _mm512_test_epi32_mask(any, _mm512_set1_epi32(~63)) == 0;
    for (int j = 0; j < 4; ++j) v[j] = tab.lookup16(idx[j], small);
  }
};
// The integers, or (kFactor) their count factors (log1p by products,
// kernels/log1p_lanes.h).
template <bool kSigned, bool kFactor = false>
struct IntLanes {
  explicit IntLanes(const float*) {}  // out_rows4 hands every Lanes the table; the integers need none
  __attribute__((target("avx512f"))) static __m512i widen(__m256i h) {
    return kSigned ? _mm512_cvtepi16_epi32(h) : _mm512_cvtepu16_epi32(h);
  }
  __attribute__((target("avx512f"))) void values(const __m512i* idx, __m512* v) const {
    for (int j = 0; j < 4; ++j) {
      if constexpr (kFactor)
        v[j] = lanes::count_factor_lanes<kSigned, lanes::F32x16>(reinterpret_cast<lanes::I32<lanes::F32x16>>(idx[j]));
      else
        v[j] = _mm512_cvtepi32_ps(idx[j]);
    }
  }
};

// Fold: quads::SumFold or ProductFold on floats (the tail's), taken to
// sixteen lanes.
template <bool kFirst, class Lanes, class Value, class Fold>
__attribute__((target("avx512f"))) void out_rows4(const float* acc, const uint16_t* x, int64_t wn, Value value,
                                                  Fold fold, float* y, int64_t ystride, int64_t prefetch_bytes) {
  const Lanes vals(value.table);
  const auto wide = fold.as(lanes::F32x16(_mm512_set1_ps(fold.scale)));
  // Channel c of 16 positions from the four registers that hold them
  // channels-last (input 4i + c of position i): lane i's index is
  // (4i + c) mod 32 into the pair (v0, v1) for positions 0-7 and into
  // (v2, v3) for positions 8-15.
  __m512i pick[4];
  for (int c = 0; c < 4; ++c)
    pick[c] = _mm512_and_si512(
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 2),
                         _mm512_set1_epi32(c)),
        _mm512_set1_epi32(31));
  int64_t w = 0;
  for (; w + 16 <= wn; w += 16) {
    const uint16_t* xs = x + 4 * w;  // 128 bytes: two lines
    prefetch_step128(xs, prefetch_bytes);
    __m512i idx[4];
    for (int j = 0; j < 4; ++j)
      idx[j] = Lanes::widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + 16 * j)));
    __m512 v[4];
    vals.values(idx, v);
    if (!kFirst)
      for (int j = 0; j < 4; ++j) v[j] = wide.step(_mm512_loadu_ps(acc + 4 * w + 16 * j), v[j]);
    for (int c = 0; c < 4; ++c) {
      const __m512 ch = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(v[0], pick[c], v[1]),
                                             _mm512_permutex2var_ps(v[2], pick[c], v[3]));
      _mm512_storeu_ps(y + c * ystride + w, wide.out(ch));
    }
  }
  out4_positions(kFirst ? nullptr : acc, x, w, wn, value, fold, y, ystride);
}

template <class Lanes, class Value, class Fold>
void out_rows4_from(const float* acc, const uint16_t* x, int64_t wn, Value value, Fold fold, float* y, int64_t ystride,
                    int64_t prefetch_bytes) {
  if (acc)
    out_rows4<false, Lanes>(acc, x, wn, value, fold, y, ystride, prefetch_bytes);
  else
    out_rows4<true, Lanes>(acc, x, wn, value, fold, y, ystride, prefetch_bytes);
}

// See pair_sums4_avx512() in the header; with ProductFold and count
// factors, product_rows4_avx512()'s f2 = 2.
template <bool kFirst, bool kSigned, class Fold>
__attribute__((target("avx512f"))) void pair_rows4(const float* acc, const uint16_t* x, int64_t wn, Fold fold, float* y,
                                                   int64_t ystride, int64_t prefetch_bytes) {
  constexpr bool kFactor = Fold::kProduct;
  // Output w's channel c lies at lane 4w + c of the pair (outputs 0-3,
  // outputs 4-7): lanes 0-7 of `c01` pick channel 0 of outputs 0-7 and
  // lanes 8-15 channel 1; `c23` channels 2 and 3.
  const __m512i out_w = _mm512_slli_epi32(_mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0), 2);
  const __m512i c01 = _mm512_add_epi32(out_w, _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m512i c23 = _mm512_add_epi32(c01, _mm512_set1_epi32(2));
  const auto wide = fold.as(lanes::F32x16(_mm512_set1_ps(fold.scale)));
  const IntLanes<kSigned, kFactor> vals(nullptr);
  int64_t w = 0;
  for (; w + 8 <= wn; w += 8) {
    const uint16_t* xs = x + 8 * w;  // 16 positions of 4 inputs: 128 bytes, two lines
    prefetch_step128(xs, prefetch_bytes);
    __m512i idx[4];
    for (int j = 0; j < 4; ++j)
      idx[j] = IntLanes<kSigned>::widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + 16 * j)));
    __m512 v[4];  // positions 4j to 4j + 3, one per 128-bit lane: (acc +) value, or (acc *) factor
    vals.values(idx, v);
    if (!kFirst)
      for (int j = 0; j < 4; ++j) v[j] = wide.step(_mm512_loadu_ps(acc + 8 * w + 16 * j), v[j]);
    __m512 s[2];  // outputs 0-3 and 4-7, channels-last, from positions 2w and 2w + 1, by 128-bit lanes
    for (int j = 0; j < 2; ++j) {
      const __m512 even = _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512 odd = _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1));
      s[j] = wide.pair(even, odd);
    }
    const __m512 lo = _mm512_permutex2var_ps(s[0], c01, s[1]), hi = _mm512_permutex2var_ps(s[0], c23, s[1]);
    _mm256_storeu_ps(y + w, _mm512_castps512_ps256(lo));
    _mm256_storeu_ps(y + ystride + w, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lo), 1)));
    _mm256_storeu_ps(y + 2 * ystride + w, _mm512_castps512_ps256(hi));
    _mm256_storeu_ps(y + 3 * ystride + w, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(hi), 1)));
  }
  if constexpr (kFactor)
    pair4_positions(kFirst ? nullptr : acc, x, Factor16<kSigned>{}, fold, w, wn, y, ystride);
  else
    pair4_positions(kFirst ? nullptr : acc, x, Value16{nullptr, kSigned}, fold, w, wn, y, ystride);
}
}  // namespace
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void pair_sums4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                       float inv, int64_t prefetch_bytes) {
  quads::by_kind(acc, is_signed, [&](auto first, auto sign) {
    pair_rows4<decltype(first)::value, decltype(sign)::value>(acc, x, wn, SumFold<float>{inv}, y, ystride,
                                                              prefetch_bytes);
  });
}

void table_rows_out4_avx512(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                            int64_t ystride, float inv, int64_t prefetch_bytes) {
  out_rows4_from<TableLanes>(acc, x, wn, Value16{table, false}, SumFold<float>{inv}, y, ystride, prefetch_bytes);
}

void convert_rows_out4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y,
                              int64_t ystride, float inv, int64_t prefetch_bytes) {
  const Value16 value{nullptr, is_signed};
  const SumFold<float> fold{inv};
  if (is_signed)
    out_rows4_from<IntLanes<true>>(acc, x, wn, value, fold, y, ystride, prefetch_bytes);
  else
    out_rows4_from<IntLanes<false>>(acc, x, wn, value, fold, y, ystride, prefetch_bytes);
}

void product_rows4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                          float* y, int64_t ystride, float inv, int64_t prefetch_bytes) {
  quads::by_product_kind(acc, is_signed, cells, inv, [&](auto first, auto sign, auto fold) {
    constexpr bool kFirst = decltype(first)::value, kSigned = decltype(sign)::value;
    if (f2 == 2)
      pair_rows4<kFirst, kSigned>(acc, x, wn, fold, y, ystride, prefetch_bytes);
    else
      out_rows4<kFirst, IntLanes<kSigned, true>>(acc, x, wn, Factor16<kSigned>{}, fold, y, ystride, prefetch_bytes);
  });
}

void table_rows_add_avx512(float* acc, const uint16_t* x, int64_t n, const float* table, bool first,
                           int64_t prefetch_bytes) {
  if (first)
    add_rows<true>(acc, x, n, table, prefetch_bytes);
  else
    add_rows<false>(acc, x, n, table, prefetch_bytes);
}
#else
void table_rows_out4_avx512(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                            int64_t ystride, float inv, int64_t) {
  // Never chosen here (rows_avx512() is false); the plain loop, for safety.
  out4_positions(acc, x, 0, wn, Value16{table, false}, quads::SumFold<float>{inv}, y, ystride);
}
void convert_rows_out4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y,
                              int64_t ystride, float inv, int64_t) {
  // Never chosen here (rows_avx512() is false); the plain loop, for safety.
  out4_positions(acc, x, 0, wn, Value16{nullptr, is_signed}, quads::SumFold<float>{inv}, y, ystride);
}
void pair_sums4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                       float inv, int64_t) {
  // Never chosen here (rows_avx512() is false); the plain loop, for safety.
  pair4_positions(acc, x, Value16{nullptr, is_signed}, quads::SumFold<float>{inv}, 0, wn, y, ystride);
}
void product_rows4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                          float* y, int64_t ystride, float inv, int64_t) {
  // Never chosen here (rows_avx512() is false); the plain loop, for safety.
  quads::product_positions(acc, x, is_signed, f2, cells, wn, y, ystride, inv);
}
void table_rows_add_avx512(float* acc, const uint16_t* x, int64_t n, const float* table, bool first, int64_t) {
  // Never chosen here (rows_avx512() is false); the plain loop, for safety.
  for (int64_t k = 0; k < n; ++k) acc[k] = first ? table[x[k]] : acc[k] + table[x[k]];
}
#endif

}  // namespace mrmf::kernels
