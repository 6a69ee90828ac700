// A 16-bit table lookup over a row, accumulated: acc[k] = table[x[k]] (first
// row of a block) or acc[k] + table[x[k]], k < n -- the fused downsample's CPU
// rows with log1p through the table (kernels/fused_downsample.h, seg_add).
//
// Why its own code: g++ turns the plain loop into a per-element lane insert
// (movzwl + vinsertps), ~1.2 lookups per cycle on a Zen 5 core, so 1/8 with
// log1p on CosmoFlow's count-like input ran at 52 % of memcpy where the same
// reduction without log1p runs at 89 %. AVX2's gathers were slower still on
// counts (bench/results/cpu_data_2026-11-27e.txt). With AVX-512 the table's
// first 64 entries fit in four registers, and two two-source permutes plus a
// blend look up 16 elements at once; counts are small (CosmoFlow's synthetic
// cubes: 99.7 % below 64), so nearly every 16 elements take that path, and a
// group with a larger value takes one 16-lane gather. The same table entries
// added in the same order: the bits of the plain loop (tested).
//
// Host only. Wherever AVX-512F is absent (AMD before Zen 4, e.g. Perlmutter's
// Milan hosts) or switched off (set_table_rows_simd(false): the benchmark's
// side-by-side row and the tests' comparison), seg_add's own loop runs.
#pragma once

#include <cstdint>

namespace mrmf::kernels {

// True when the vector path runs: the CPU has AVX-512F and it is not off.
bool table_rows_simd();
// Turns the vector path off (or back on where the CPU has it); process-wide.
void set_table_rows_simd(bool on);

// acc[k] = table[x[k]] (first) or acc[k] + table[x[k]], k < n, with
// AVX-512F; call only when table_rows_simd(). `table` holds 2^16 floats.
void table_rows_add_avx512(float* acc, const uint16_t* x, int64_t n, const float* table, bool first);

}  // namespace mrmf::kernels
