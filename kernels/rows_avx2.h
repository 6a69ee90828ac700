// Hand-written AVX2 pieces of the fused downsample's CPU rows, for CPUs
// without AVX-512 (AMD before Zen 4: Perlmutter's Milan hosts) or with it
// switched off (MRMF_CPU_AVX512=0). The same rows as the AVX-512 pieces 2,
// 2b, 4 and 5 (kernels/rows_avx512.h), with the same formulas and bits, on
// four channels-last 16-bit channels: CosmoFlow's raw counts (uint16 or
// int16) without a transform,
//   convert_rows_out4_avx2: a block's last row, last-axis factor 1 (1/2
//     along x = 2x1x1, 2x2x1): y[c * ystride + w] = (0 + (acc[4w + c] +)
//     x[4w + c]) * inv;
//   pair_sums4_avx2: last-axis factor 2 (1/2 along z = 1x1x2, 1/8's last
//     row): y[c * ystride + w] = ((0 + t[8w + c]) + t[8w + 4 + c]) * inv,
//     t[k] = (acc[k] +) x[k];
// and the last row of such a block reduced by products under log1p
// (product_rows4_avx2: the two loops with count factors multiplied and the
// logarithm on eight lanes, kernels/log1p_lanes.h), and log1p from the
// table (any 16-bit type, float16 included) with last-axis factor 1
// (table_rows_out4_avx2: CosmoFlow's 1/1 with log1p, 1/2 along x, 2x2x1
// summed, the ladder's first level, whose plain code makes a second pass
// to deinterleave).
// Why: g++ compiles the plain deinterleave with the accumulator into
// 128-bit shuffles with spills, and makes three passes (row into acc, pair
// sums, deinterleave) for pairs. Here eight positions (two per register,
// one per 128-bit lane) are converted (or made count factors, or looked up
// in the table), summed (or multiplied, and their logarithm taken) and
// scaled in place, then a
// 4x8 transpose (unpacks and one lane-crossing permute per channel) writes
// eight outputs per channel. Measured against the plain loops side by side
// in bench_data's ", plain loops" rows.
#pragma once

#include <cstdint>

namespace mrmf::kernels {

// True when the AVX2 pieces run: the CPU has AVX2, they are not off
// (set_rows_avx2), and the AVX-512 pieces, which take the same rows, are
// not running (rows_avx512()).
bool rows_avx2();
// Turns them off (or back on where the CPU has AVX2); process-wide. For the
// benchmark's plain-loop rows and the tests' comparisons.
void set_rows_avx2(bool on);

// acc null: the block's only row. x holds 4 * wn inputs, 16-bit integers
// (int16 where is_signed). prefetch_bytes > 0: a line that far ahead of
// the input per 64 bytes read.
void convert_rows_out4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y,
                            int64_t ystride, float inv, int64_t prefetch_bytes = 0);
// x holds 8 * wn inputs.
void pair_sums4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                     float inv, int64_t prefetch_bytes = 0);

// Piece 2 of kernels/rows_avx512.h (log1p from the table, f2 = 1, the
// block's last or only row), its lookups scalar loads into the lanes; x
// holds 4 * wn 16-bit patterns.
void table_rows_out4_avx2(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                          int64_t ystride, float inv, int64_t prefetch_bytes = 0);

// Piece 5 of kernels/rows_avx512.h: f2 1 or 2, x holds 4 * f2 * wn inputs.
void product_rows4_avx2(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                        float* y, int64_t ystride, float inv, int64_t prefetch_bytes = 0);

// The fused kernel's entry to these rows: the AVX-512 piece where
// rows_avx512(), else the AVX2 one where rows_avx2(); false (nothing
// written) where neither runs, and the plain loops take the row.
bool convert_rows_out4_simd(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                            float inv, int64_t prefetch_bytes);
bool pair_sums4_simd(const float* acc, const uint16_t* x, bool is_signed, int64_t wn, float* y, int64_t ystride,
                     float inv, int64_t prefetch_bytes);
bool product_rows4_simd(const float* acc, const uint16_t* x, bool is_signed, int64_t f2, int64_t cells, int64_t wn,
                        float* y, int64_t ystride, float inv, int64_t prefetch_bytes);
bool table_rows_out4_simd(const float* acc, const uint16_t* x, int64_t wn, const float* table, float* y,
                          int64_t ystride, float inv, int64_t prefetch_bytes);

}  // namespace mrmf::kernels
