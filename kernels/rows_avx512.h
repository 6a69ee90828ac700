// Hand-written AVX-512 pieces of the fused downsample's CPU rows
// (kernels/fused_downsample_segments.h), for the loops g++ leaves far from memory
// bandwidth. Each gives the bits of the loop it replaces: the same values
// added (or, for 5, multiplied) in the same order, no contraction (tested
// against the plain loops and the functors, tests/unit/
// test_simd_rows.cpp and test_product_rows.cpp). Code compiled for
// AVX-512 may use FMA, which g++ contracts into unless told not to: the
// build says -ffp-contract=off.
//
// 1. table_rows_add_avx512: log1p through the 16-bit table, accumulated,
//    acc[k] = table[x[k]] (a block's first row) or acc[k] + table[x[k]].
//    g++ turns the plain loop into a lane insert per element (movzwl +
//    vinsertps), ~1.2 lookups per cycle on a Zen 5 core: 1/8 with log1p on
//    CosmoFlow's count-like input ran at 52 % of memcpy where the same
//    reduction without log1p runs at 89 %; AVX2's gathers were slower still
//    on counts (bench/results/cpu_data_2026-11-27e.txt). Here the table's
//    first 64 entries sit in four registers, and two two-source permutes
//    plus a blend look up 16 elements at once; counts are small (CosmoFlow's
//    synthetic cubes: 99.7 % below 64), and a group holding a larger value
//    takes one 16-lane gather. 94-95 % of memcpy
//    (bench/results/cpu_data_2026-11-28.txt). The same with AVX2 (eight
//    one-register permutes and seven blends per 8 lanes) was 1.08-1.21x
//    slower than the plain loop on a Milan VM (session 37,
//    bench/results/cpu_data_2026-11-29d.txt): not kept.
// 2. table_rows_out4_avx512: a block's last row of four channels-last
//    channels (CosmoFlow's), f2 = 1, log1p from the table, straight into the
//    channel-major outputs: y[c * ystride + w] = (0 + (acc[4w + c] +)
//    table[x[4w + c]]) * inv. The plain code makes two passes (the table
//    rows into acc, then the deinterleave; one pass with the lookups inside
//    the deinterleave did not vectorize), and on an Emerald Rapids VM the
//    second pass cost as much as the first: 1/1 with log1p on counts ran at
//    69 % of memcpy where 1/1 without log1p ran at 87 % in the same run; in
//    one pass, 72-90 % in three runs (87-90 % outside one run low on every
//    row; bench/results/cpu_data_2026-11-30b.txt).
//    convert_rows_out4_avx512: the same rows without a transform, for
//    16-bit integers (the value is the integer): the last row of CosmoFlow's
//    1/2 along x (2x1x1) and of 2x2x1. On the same VM 1/2 along x ran at
//    68-81 % of memcpy, its last row's deinterleave compiled to 128-bit
//    shuffles and spills; now 87-93 % (three alternating rounds against the
//    binary before, bench/results/cpu_data_2026-11-30c.txt).
// 3. pair_sums3_avx512: three float32 channels, channels-last, two
//    neighbours along the last axis -- the Neuron Inverter's T 1600 -> 800.
//    The loops it replaces (a copy, a stride-6 sum of pairs, a stride-3
//    deinterleave) cost ~1.8 us per 19.2 KB sample on one core, against
//    ~1.0 us to copy it; the synchronous loader row went from 62-69 to
//    80-89 % of the plain read, side by side.
// 4. pair_sums4_avx512: four 16-bit integer channels, channels-last, two
//    neighbours along the last axis, no transform: a block's last row,
//    y[c * ystride + w] = ((0 + t[8w + c]) + t[8w + 4 + c]) * inv with
//    t[k] = (acc[k] +) x[k] -- CosmoFlow's 1/2 along z (1x1x2) and 1/8
//    (2x2x2). The plain code makes three passes (the row into acc, the
//    pair sums into a buffer, the deinterleave); here the pairs are 128-bit
//    lanes of four registers, summed after one shuffle each, and two
//    permutes deinterleave eight outputs per channel. Emerald Rapids VM,
//    the same rounds: 1/2 along z 62-65 -> 85-87 % of memcpy, 1/8 82-84 ->
//    85-95 %, and with the row above the CosmoFlow ladder 62-77 -> 79-80 %.
// 5. product_rows4_avx512: the last row of a block of four channels-last
//    16-bit count channels reduced by products under log1p (2x2x1 and 1/8
//    of CosmoFlow's counts; kernels/log1p_products.h), f2 = 1 or 2:
//      f2 = 1: y[c * ystride + w] = L((acc[4w + c] *) u(x[4w + c])) * inv,
//      f2 = 2: y[c * ystride + w] = L((1 * t[8w + c]) * t[8w + 4 + c]) * inv,
//              t[k] = (acc[k] *) u(x[k]),
//    u = count_factor, L = log_of_count_product(., cells): 2b's and 4's
//    loops with multiplications, and the logarithm on sixteen lanes
//    (kernels/log1p_lanes.h). The plain code made three passes over acc
//    (the factors, a logarithm per output, the deinterleave): on the
//    Emerald Rapids VM 2x2x1 with log1p on counts ran at 46-62 % of memcpy
//    where summing the table ran at 72-92 %; now 55-79 % (1/8: 56-64 ->
//    56-78 %; bench/results/cpu_data_2026-11-30f.txt).
//
// Host only. Wherever AVX-512F is absent (AMD before Zen 4, e.g. Perlmutter's
// Milan hosts) or switched off (set_rows_avx512(false): the benchmark's
// side-by-side rows and the tests' comparison), the plain loops run, except
// for 2, 2b, 4 and 5, which have AVX2 versions (kernels/rows_avx2.h).
#pragma once

#include <cstdint>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MRMF_ROWS_AVX512 1
#endif

namespace mrmf::kernels {

// True when the AVX-512 pieces run: the CPU has AVX-512F and they are not
// off. They start on unless the environment has MRMF_CPU_AVX512=0 (for a
// CPU where 512-bit code lowers the clock or gathers are slow: Intel
// Skylake/Cascade Lake, where they are not measured).
bool rows_avx512();
// Turns them off (or back on where the CPU has them); process-wide.
void set_rows_avx512(bool on);
// Throws a Usage error naming MRMF_CPU_AVX512 when it holds anything but
// 0 or 1 (rows_avx512() never throws: it runs inside parallel regions, and
// treats such a value as unset). The mrmf command checks it at start.
void check_rows_avx512_env();
// What the rows run with, for `mrmf info`.
std::string rows_avx512_description();

// 1. (see above) with AVX-512F; call only when rows_avx512(). `table` holds
// 2^16 floats.
// prefetch_bytes > 0: a line that far ahead of the input per 64 bytes read
// (the fused kernel's blocks of several rows, see prefetch_ahead()).
void table_rows_add_avx512(float* acc, const uint16_t* x, int64_t n, const float* table, bool first,
                           int64_t prefetch_bytes = 0);

// 2. (see above) with AVX-512F; call only when rows_avx512(). acc null: the
// block's only row (no accumulator). x holds 4 * wn inputs.
void table_rows_out4_avx512(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                            int64_t ystride, float inv, int64_t prefetch_bytes = 0);

// 2b. (see above) the same without the transform: y[c * ystride + w] =
// (0 + (acc[4w + c] +) x[4w + c]) * inv, x 16-bit integers (int16 where
// is_signed).
void convert_rows_out4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y,
                              int64_t ystride, float inv, int64_t prefetch_bytes = 0);

// 4. (see above) with AVX-512F; call only when rows_avx512(). acc null: the
// block's only row (no accumulator). x holds 8 * wn inputs, 16-bit integers
// (int16 where is_signed).
void pair_sums4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                       float inv, int64_t prefetch_bytes = 0);

// 5. (see above) with AVX-512F; call only when rows_avx512(). f2 is 1 or
// 2; x holds 4 * f2 * wn inputs; cells: the block's element count (its
// factors' scale).
void product_rows4_avx512(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                          float* y, int64_t ystride, float inv, int64_t prefetch_bytes = 0);

#if defined(MRMF_ROWS_AVX512)
// 3. (see above): for w < wn and c < 3,
//   y[c * ystride + w] = ((0 + a[6w + c]) + a[6w + 3 + c]) * inv,
// the fused kernel's order (the sum from 0 of the two neighbours, then the
// scale), `a` a float32 input row. Call only when rows_avx512(). In the
// header but never inlined (noinline: the AVX2 row copy cannot take AVX-512
// code, and clang 14 crashed when asked to flatten it in); it reads straight
// from the input: see seg_out() for why not from the accumulator.
//
// Sixteen outputs per step: the 96 floats of 16 positions in six registers;
// input k = 3z + c of lane w lies at 6w + k, gathered by one two-register
// permute per register pair (index (6w + k) mod 32) and two blends by which
// pair holds it.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_undefined_*() merge operands
#endif
__attribute__((target("avx512f"), noinline)) inline void pair_sums3_avx512(const float* a, int64_t wn, float* y,
                                                                           int64_t ystride, float inv) {
  const __m512i six_w =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(6));
  __m512i idx[6];
  __mmask16 past32[6], past64[6];
  for (int k = 0; k < 6; ++k) {
    const __m512i pos = _mm512_add_epi32(six_w, _mm512_set1_epi32(k));
    idx[k] = _mm512_and_si512(pos, _mm512_set1_epi32(31));
    past32[k] = _mm512_cmpge_epi32_mask(pos, _mm512_set1_epi32(32));
    past64[k] = _mm512_cmpge_epi32_mask(pos, _mm512_set1_epi32(64));
  }
  const __m512 zero = _mm512_setzero_ps(), scale = _mm512_set1_ps(inv);
  int64_t w = 0;
  for (; w + 16 <= wn; w += 16) {
    const float* r = a + 6 * w;
    const __m512 v0 = _mm512_loadu_ps(r), v1 = _mm512_loadu_ps(r + 16), v2 = _mm512_loadu_ps(r + 32);
    const __m512 v3 = _mm512_loadu_ps(r + 48), v4 = _mm512_loadu_ps(r + 64), v5 = _mm512_loadu_ps(r + 80);
    // A macro, not a lambda: a lambda's body does not inherit the target.
#define MRMF_LANES(k)                                                                                                  \
  _mm512_mask_blend_ps(                                                                                                \
      past64[k],                                                                                                       \
      _mm512_mask_blend_ps(past32[k], _mm512_permutex2var_ps(v0, idx[k], v1), _mm512_permutex2var_ps(v2, idx[k], v3)), \
      _mm512_permutex2var_ps(v4, idx[k], v5))
    for (int c = 0; c < 3; ++c) {
      const __m512 s = _mm512_add_ps(_mm512_add_ps(zero, MRMF_LANES(c)), MRMF_LANES(3 + c));
      _mm512_storeu_ps(y + c * ystride + w, _mm512_mul_ps(s, scale));
    }
#undef MRMF_LANES
  }
  for (; w < wn; ++w)
    for (int c = 0; c < 3; ++c) y[c * ystride + w] = ((0.f + a[6 * w + c]) + a[6 * w + 3 + c]) * inv;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace mrmf::kernels
