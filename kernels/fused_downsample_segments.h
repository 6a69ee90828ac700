// The CPU's rows of the fused downsample functor (kernels/fused_downsample.h,
// whose per-position math the GPU runs), one output segment at a time:
// host only. It derives from the functor so that both share the
// conversion, transform, products and summation rule -- the bits CPU and
// GPU must agree on -- while the row machinery (accumulators, the
// AVX2/AVX-512 pieces, prefetching) stays out of what nvcc compiles. The
// traversal that drives these rows over a call's planes and levels is
// kernels/fused_downsample_rows.h.
//
// Per output row and segment of it, the block's f0 x f1 input rows are
// streamed once each in (a, b) order. All rows but the last add into a
// small accumulator with one running sum per INPUT position (w, z, c):
// a unit-stride stream in and out, which vectorises whatever C and f2
// are (an accumulator per output made every row a strided
// deinterleave: 2x2x2 ran at 62 % of memcpy). The last row adds itself,
// sums the f2 neighbours and writes the channel-major output. Channel
// counts and the last-axis factor are compile-time for the real data
// (CosmoFlow C = 4, Neuron Inverter C = 3; f2 = 1, 2, 4), so that GCC
// fully unrolls the per-position (z, c) loops; other values take the
// runtime versions. Channels-first rows are the same with one channel.
#pragma once

#if defined(__CUDACC__)
#error "kernels/fused_downsample_segments.h is CPU code; device code includes kernels/fused_downsample.h"
#endif

#include "core/prefetch.h"
#include "kernels/fused_downsample.h"
#include "kernels/rows_avx2.h"
#include "kernels/rows_avx512.h"

namespace mrmf::kernels {

template <RawType R, FusedTransform TF>
struct FusedSegmentsCpu : FusedDownsample<R, TF> {
  using Base = FusedDownsample<R, TF>;
  // The functor's members, named here because a dependent base's are not
  // found by unqualified lookup.
  using Base::by_product;
  using Base::by_table;
  using Base::factor_of_bits;
  using Base::g;
  using Base::kProducts;
  using Base::log_of_product;
  using Base::lut;
  using Base::o;
  using Base::transform;
  using Base::value;
  using Base::x;
  using typename Base::T;

  explicit FusedSegmentsCpu(const Base& k) : Base(k) {}

  static constexpr int64_t kAcc = 2048;  // floats (8 KiB): stays in L1

  // Channel of lane j of a position: compile-time pattern when kC > 0.
  template <int kC>
  MRMF_INLINE int64_t lane_channel(int64_t j, int64_t C, int64_t c_fixed) const {
    if (kC == 1) return c_fixed;
    return j % (kC > 0 ? kC : C);
  }

  // acc[k] (+)= lut[bits of x[k]], the table's rows without AVX-512. Its
  // own function with restrict pointers: once acc's address is passed to
  // table_rows_add_avx512(), g++ must assume that lut may point into acc,
  // and the same loop in seg_add (a float store, then float loads of lut)
  // compiled to scalar code -- 1/8 with log1p on counts 2x slower.
  template <bool kFirst>
  static MRMF_INLINE void table_rows(float* __restrict acc, const T* __restrict xs, int64_t n,
                                     const float* __restrict table) {
    for (int64_t k = 0; k < n; ++k) {
      const float v = table[RawLoad<R>::bits16(xs, k)];
      acc[k] = kFirst ? v : acc[k] + v;
    }
  }

  // acc[k] (*)= count factor of x[k], the rows of a block reduced by
  // products (by_product()); restrict pointers as in table_rows().
  template <bool kFirst>
  static MRMF_INLINE void factor_rows(float* __restrict acc, const T* __restrict xs, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
      const float u = factor_of_bits(RawLoad<R>::bits16(xs, k));
      acc[k] = kFirst ? u : acc[k] * u;
    }
  }

  // A row that is not the block's last: acc[k] (+)= value, k over wn positions
  // of P = f2 * C inputs each; where the block is reduced by products (pc,
  // its element count; 0 where it is summed), acc[k] (*)= count factor.
  template <bool kFirst, int kC, int kF2, bool kPf = false>
  void seg_add(float* acc, int64_t row, int64_t wn, int64_t C, int64_t f2, int64_t c_fixed, int64_t pc) const {
    const int64_t P = (kC > 0 ? kC : C) * (kF2 > 0 ? kF2 : f2);
    if (TF == FusedTransform::Log1p) {
      if constexpr (kProducts) {
        if (pc > 0) {
          if constexpr (kPf)
            by_lines<kC, kF2>(row, wn, P, [&](int64_t w0, int64_t w1) {
              factor_rows<kFirst>(acc + w0 * P, x + row + w0 * P, (w1 - w0) * P);
            });
          else
            factor_rows<kFirst>(acc, x + row, wn * P);
          return;
        }
      }
      // log1p ignores the channel: one flat unit-stride loop, the same
      // additions. With the (w, j) nest g++ unrolled j (P = 8 at f2 = 2) and
      // vectorized neither loop around log1p's ~40 operations per element:
      // 2x2x2 with log1p ran at 13 % of memcpy against 67 % without.
      // The table-or-compute choice is made once, outside the loop: inside
      // it (value()'s test) g++ vectorized neither, and 1/1 with log1p
      // computed fell from 52 to ~310 ms per [8, 128^3, 4] batch.
      if constexpr (RawLoad<R>::kBits16) {
        if (by_table()) {  // with AVX-512 where the CPU has it: 16 lookups at once (kernels/rows_avx512.h)
          if (rows_avx512())
            table_rows_add_avx512(acc, bits16_row(row), wn * P, lut, kFirst, simd_prefetch<kPf>());
          else if constexpr (kPf)  // blocks of several rows: see prefetch_ahead()
            by_lines<kC, kF2>(row, wn, P, [&](int64_t w0, int64_t w1) {
              table_rows<kFirst>(acc + w0 * P, x + row + w0 * P, (w1 - w0) * P, lut);
            });
          else
            table_rows<kFirst>(acc, x + row, wn * P, lut);
          return;
        }
      }
      for (int64_t k = 0; k < wn * P; ++k) {
        const float v = transform(RawLoad<R>::get(x, row + k), 0);
        acc[k] = kFirst ? v : acc[k] + v;
      }
      return;
    }
    if constexpr (kPf) {
      // A flat loop per step: with the (w, j) nest over a step's few
      // positions g++ converted the first row element by element.
      by_lines<kC, kF2>(row, wn, P, [&](int64_t w0, int64_t w1) {
        // k0 is a position's first input and P a multiple of the channel
        // count, so (k - k0) gives lane_channel the channel that j did.
        const int64_t k0 = w0 * P;
        for (int64_t k = k0; k < w1 * P; ++k) {
          const float v = value(row + k, lane_channel<kC>(k - k0, C, c_fixed));
          acc[k] = kFirst ? v : acc[k] + v;
        }
      });
      return;
    }
    for (int64_t w = 0; w < wn; ++w)
      for (int64_t j = 0; j < P; ++j) {
        const float v = value(row + w * P + j, lane_channel<kC>(j, C, c_fixed));
        acc[w * P + j] = kFirst ? v : acc[w * P + j] + v;
      }
  }

  // The block's last row: per output (w, c), the sum from 0 over z of
  // (acc + value), scaled; channel c's outputs are ystride apart. At f2 = 1
  // that is one pass (convert, add, deinterleave). At f2 > 1 a single pass
  // mixes the z-sum into the deinterleave and compiles to a shuffle storm
  // (it cost three times the f2 = 1 pass per row), so it is split into
  // three vector-friendly ones with the same additions in the same order:
  // the row into acc (t_z = acc + value), the z-sums into a [w][c] buffer
  // (s = 0 + t_0 + t_1 ...), then the deinterleave.
  template <bool kFirst, int kC, int kF2, bool kPf = false>
  void seg_out(float* acc, int64_t row, int64_t wn, int64_t C, int64_t f2, int64_t c_fixed, float* y, int64_t ystride,
               float inv, int64_t pc) const {
    const int64_t Cn = kC > 0 ? kC : C;
    if constexpr (kProducts) {
      if (pc > 0) {
        // Four channels (CosmoFlow's), f2 1 or 2 (2x2x1, 1/8, any block of
        // 4-15 cells with such a last axis): the factors, the logarithms and
        // the deinterleave in one pass with AVX-512 or AVX2
        // (kernels/rows_avx512.h, piece 5).
        if constexpr (kC == 4 && (kF2 == 1 || kF2 == 2)) {
          if (product_rows4_simd(kFirst ? nullptr : acc, bits16_row(row), R == RawType::I16, kF2, pc, wn, y, ystride,
                                 inv, simd_prefetch<kPf>()))
            return;
        }
        seg_add<kFirst, kC, kF2, kPf>(acc, row, wn, C, f2, c_fixed, pc);
        products_out<kC, kF2>(acc, wn, C, f2, y, ystride, inv, pc);
        return;
      }
    }
    if (kF2 == 1 && TF == FusedTransform::Log1p) {
      // Two passes, the same additions: log1p's ~40 operations per element
      // inside the deinterleave kept g++ from vectorizing it (1/1 with log1p
      // at 7 % of memcpy); the unit-stride pass into acc vectorizes. Four
      // channels with AVX-512 or AVX2: one pass after all
      // (kernels/rows_avx512.h, rows_avx2.h).
      if constexpr (kC == 4 && RawLoad<R>::kBits16) {
        if (by_table() && table_rows_out4_simd(kFirst ? nullptr : acc, bits16_row(row), wn, lut, y, ystride, inv,
                                               simd_prefetch<kPf>()))
          return;
      }
      seg_add<kFirst, kC, kF2, kPf>(acc, row, wn, C, f2, c_fixed, 0);
      for (int64_t w = 0; w < wn; ++w)
        for (int64_t c = 0; c < Cn; ++c) y[c * ystride + w] = (0.f + acc[w * Cn + c]) * inv;
      return;
    }
    if constexpr (kF2 == 1) {  // constexpr: no by_lines copy for the other factors
      // Four 16-bit integer channels, the last row after others (1/2 along
      // x, 2x2x1), in one pass with AVX-512 where the CPU has it
      // (kernels/rows_avx512.h), else with AVX2 (kernels/rows_avx2.h). Not
      // a block's only row (1/1): there the plain loop is one pass already,
      // and with the call 1/1 and three levels measured level or 1-4 points
      // lower in four runs.
      if constexpr (!kFirst && kIntQuads<kC>) {
        if (convert_rows_out4_simd(acc, bits16_row(row), R == RawType::I16, wn, y, ystride, inv, simd_prefetch<kPf>()))
          return;
      }
      const auto positions = [&](int64_t w0, int64_t w1) {
        for (int64_t w = w0; w < w1; ++w)
          for (int64_t c = 0; c < Cn; ++c) {
            const int64_t k = w * Cn + c;
            const float v = value(row + k, lane_channel<kC>(c, C, c_fixed));
            y[c * ystride + w] = (0.f + (kFirst ? v : acc[k] + v)) * inv;
          }
      };
      if constexpr (kPf)
        by_lines<kC, kF2>(row, wn, Cn, positions);
      else
        positions(0, wn);
      return;
    }
    const int64_t F2 = kF2 > 0 ? kF2 : f2, P = Cn * F2;
    // Four 16-bit integer channels, pairs (1/2 along CosmoFlow's last axis,
    // 1/8's last row) in one pass with AVX-512 (kernels/rows_avx512.h),
    // else with AVX2 (kernels/rows_avx2.h).
    if constexpr (kF2 == 2 && kIntQuads<kC>) {
      if (pair_sums4_simd(kFirst ? nullptr : acc, bits16_row(row), R == RawType::I16, wn, y, ystride, inv,
                          simd_prefetch<kPf>()))
        return;
    }
#if defined(MRMF_ROWS_AVX512)
    // Three float32 channels, pairs, one row (the Neuron Inverter's T / 2):
    // the passes below with AVX-512 straight from the input, where the CPU
    // has it (kernels/rows_avx512.h). Not from acc: in session 32 a call
    // here taking acc's address for every type and transform made 1/8
    // (2x2x2) of uint16 cubes, a loop elsewhere in the same row copy, fall
    // from 91-94 to 76-80 % of memcpy (three alternating runs each way;
    // presumably the aliasing that table_rows() works around: there the
    // input is float too). The four-channel calls above take acc in the
    // uint16/int16 rows without a transform only, whose loads of 16-bit
    // integers float stores to acc cannot alias; the plain rows of that
    // binary measured as before (bench/results/cpu_data_2026-11-30c.txt).
    if constexpr (kC == 3 && kF2 == 2 && kFirst && R == RawType::F32 && TF == FusedTransform::None) {
      if (rows_avx512()) {
        pair_sums3_avx512(x + row, wn, y, ystride, inv);
        return;
      }
    }
#endif
    seg_add<kFirst, kC, kF2, kPf>(acc, row, wn, C, f2, c_fixed, 0);
    if (F2 == 1) {
      // f2 = 1 known only at run time (a channel count other than 3 or 4):
      // acc holds the sums themselves, up to kAcc of them -- more than `t`
      // below holds (a segment of 2048 sums overflowed it: 1024 x 2 channels).
      for (int64_t w = 0; w < wn; ++w)
        for (int64_t c = 0; c < Cn; ++c) y[c * ystride + w] = (0.f + acc[w * Cn + c]) * inv;
      return;
    }
    float t[kAcc / 2];  // wn * C <= kAcc / f2, f2 >= 2
    for (int64_t w = 0; w < wn; ++w)
      for (int64_t c = 0; c < Cn; ++c) {
        float sum = 0.f;
        for (int64_t z = 0; z < F2; ++z) sum += acc[w * P + z * Cn + c];
        t[w * Cn + c] = sum;
      }
    for (int64_t w = 0; w < wn; ++w)
      for (int64_t c = 0; c < Cn; ++c) y[c * ystride + w] = t[w * Cn + c] * inv;
  }

  // seg_out() of a block reduced by products, after its last row's factors,
  // where no vector row takes it (other channel counts or last-axis
  // factors, a CPU without AVX2, the pieces off):
  // per output (w, c) the product over z from 1 of acc's per-position
  // products, its logarithm (a flat loop, which vectorizes), then the
  // deinterleave, scaled.
  template <int kC, int kF2>
  void products_out(float* acc, int64_t wn, int64_t C, int64_t f2, float* y, int64_t ystride, float inv,
                    int64_t pc) const {
    const int64_t Cn = kC > 0 ? kC : C, F2 = kF2 > 0 ? kF2 : f2, P = Cn * F2;
    float t[kAcc / 2];  // wn * C <= kAcc / f2 where f2 > 1
    float* const p = F2 == 1 ? acc : t;
    if (F2 > 1)
      for (int64_t w = 0; w < wn; ++w)
        for (int64_t c = 0; c < Cn; ++c) {
          float prod = 1.f;
          for (int64_t z = 0; z < F2; ++z) prod *= acc[w * P + z * Cn + c];
          t[w * Cn + c] = prod;
        }
    log_rows(p, wn * Cn, pc);
    for (int64_t w = 0; w < wn; ++w)
      for (int64_t c = 0; c < Cn; ++c) y[c * ystride + w] = p[w * Cn + c] * inv;
  }
  static MRMF_INLINE void log_rows(float* __restrict p, int64_t n, int64_t pc) {
    for (int64_t k = 0; k < n; ++k) p[k] = log_of_product(p[k], pc);
  }

  // Software prefetch kPrefetchBytes ahead of the row being read, one line
  // per 64 bytes of it, issued inside the row's conversion loop. Why: a
  // 2x2x2 block reads two input planes at once, and the hardware prefetcher
  // alone kept too few of their lines in flight (on the Intel VMs 1/8 at
  // 57 % of memcpy without). Ahead by 4 KB: the next segments' rows for
  // consecutive output rows (2 and 8 KB within the noise on the Milan VM).
  // Interleaved, not as a burst of the block's lines before its first row
  // (sessions 26-34): on the 2-core Milan VM the burst filled the core's
  // outstanding misses and the conversion waited behind it -- a quarter of
  // the kernel's samples on the prefetches, and the kernel's time the sum of
  // a read-only pass over the same rows and of the same work on cached
  // input. Interleaved (three alternating rounds, same VM): 1/8 52-67 ->
  // 79-91 % of memcpy, 1/2 along x 62-68 -> 84-123 %, the CosmoFlow ladder
  // 13 % less time (median of five), three levels level. Only for blocks of
  // several rows: one row is one stream, which the hardware prefetcher
  // follows. Not for log1p computed, which is compute-bound (the burst cost
  // 5-10 %). For log1p read from the table (16-bit types) without AVX-512,
  // since session 37: 1/8 with log1p on counts took 0.79-0.87 of the time
  // without (in-process A/B on the Milan VM; the CosmoFlow ladder with log1p
  // 0.97-0.98, 1/1 unchanged: one row). The AVX-512 table rows likewise,
  // since session 43 (an Emerald Rapids VM, one run before, two after): 1/8 with
  // log1p on counts summed from the table 49 -> 74-75 % of memcpy, 2x2x1
  // 54 -> 73-78 %, 1/2 along x 61 -> 80 %, the CosmoFlow ladder 58 -> 72-75 %.
  static constexpr int64_t kPrefetchBytes = 4096;
  // What the AVX-512 and AVX2 rows (kernels/rows_avx512.h, rows_avx2.h)
  // are given: the input at `row` as 16-bit patterns, and their prefetch
  // distance (none for a block's only row).
  MRMF_INLINE const uint16_t* bits16_row(int64_t row) const { return reinterpret_cast<const uint16_t*>(x + row); }
  template <bool kPf>
  static constexpr int64_t simd_prefetch() {
    return kPf ? kPrefetchBytes : 0;
  }
  // Rows the integer AVX-512 and AVX2 rows take: four channels-last 16-bit integer
  // channels (CosmoFlow's raw counts) without a transform.
  template <int kC>
  static constexpr bool kIntQuads = kC == 4 && (R == RawType::U16 || R == RawType::I16) && TF == FusedTransform::None;
  MRMF_INLINE void prefetch_ahead(int64_t elem) const {
    prefetch_line(reinterpret_cast<const char*>(x + elem) + kPrefetchBytes);
  }
  // positions(w0, w1) over [0, wn) in steps of at most 64 input bytes (one
  // position where a position is larger: shapes no real data set has), each
  // step after a prefetch of its line kPrefetchBytes ahead; P inputs per
  // position. The step is a compile-time count for the real data's shapes,
  // so that the loop inside positions() is unrolled and vectorized as a
  // whole (the prefetch's asm statement keeps the loop around it scalar).
  template <int kC, int kF2, typename F>
  MRMF_INLINE void by_lines(int64_t row, int64_t wn, int64_t P, const F& positions) const {
    constexpr int64_t kP = kC > 0 && kF2 > 0 ? kC * kF2 : 0;
    const int64_t bytes = (kP > 0 ? kP : P) * static_cast<int64_t>(sizeof(T));  // per position
    const int64_t step = bytes < 64 ? 64 / bytes : 1;                           // a constant where kP is
    int64_t w = 0;
    for (; w + step <= wn; w += step) {
      prefetch_ahead(row + w * P);
      positions(w, w + step);
    }
    positions(w, wn);
  }

  // The f0 x f1 input rows of one output segment, in (a, b) order. `x0`
  // addresses the segment's first input of row (0, 0).
  template <int kC, int kF2>
  void block(float* acc, int64_t x0, int64_t wn, const int64_t* f, int64_t C, int64_t c_fixed, float* y,
             int64_t ystride, float inv) const {
    const int64_t rows = f[0] * f[1], cells = rows * f[2];
    const int64_t pc = by_product(cells) ? cells : 0;
    if (rows == 1) {
      seg_out<true, kC, kF2>(acc, x0, wn, C, f[2], c_fixed, y, ystride, inv, pc);
      return;
    }
    // prefetch_ahead(). Not for log1p computed (see there): a 16-bit type's
    // log1p with the table off takes seg_add's computed loop, which does
    // not prefetch whatever kPf says.
    constexpr bool kPf = TF != FusedTransform::Log1p || RawLoad<R>::kBits16;
    for (int64_t a = 0; a < f[0]; ++a)
      for (int64_t b = 0; b < f[1]; ++b) {
        const int64_t row = x0 + a * g.s[0] + b * g.s[1];
        if (a == 0 && b == 0)
          seg_add<true, kC, kF2, kPf>(acc, row, wn, C, f[2], c_fixed, pc);
        else if (a == f[0] - 1 && b == f[1] - 1)
          seg_out<false, kC, kF2, kPf>(acc, row, wn, C, f[2], c_fixed, y, ystride, inv, pc);
        else
          seg_add<false, kC, kF2, kPf>(acc, row, wn, C, f[2], c_fixed, pc);
      }
  }

  // A block whose channel count (kC = 0) or last-axis factor (kF2 = 0) is
  // known only at run time: no real data set's (C = 1, 3, 4; f2 = 1, 2, 4),
  // so kept out of the flattened AVX2 row copies (MRMF_HOST_NOINLINE), where
  // the seven such variants were about half of each copy and of its
  // compile time; they run the baseline ISA's code, the same bits.
  template <int kC, int kF2>
  MRMF_HOST_NOINLINE void block_runtime(float* acc, int64_t x0, int64_t wn, const int64_t* f, int64_t C,
                                        int64_t c_fixed, float* y, int64_t ystride, float inv) const {
    block<kC, kF2>(acc, x0, wn, f, C, c_fixed, y, ystride, inv);
  }

  template <int kC>
  void block_f2(float* acc, int64_t x0, int64_t wn, const int64_t* f, int64_t C, int64_t c_fixed, float* y,
                int64_t ystride, float inv) const {
    // if constexpr: for kC = 0 the compile-time-f2 blocks are not instantiated at all.
    if constexpr (kC == 0)
      block_runtime<0, 0>(acc, x0, wn, f, C, c_fixed, y, ystride, inv);
    else if (f[2] == 1)
      block<kC, 1>(acc, x0, wn, f, C, c_fixed, y, ystride, inv);
    else if (f[2] == 2)
      block<kC, 2>(acc, x0, wn, f, C, c_fixed, y, ystride, inv);
    else if (f[2] == 4)
      block<kC, 4>(acc, x0, wn, f, C, c_fixed, y, ystride, inv);
    else
      block_runtime<kC, 0>(acc, x0, wn, f, C, c_fixed, y, ystride, inv);
  }

  // Level l's outputs at o0 = p0 * r0 + u0 (u0 in [ua, ub)) on output rows
  // [o1, o1 + rows) of the last axis, read from the input. Consecutive rows
  // form one stretch of rows * O2 outputs when f1 = 1 (their inputs are then
  // consecutive too), so rows > 1 needs f1 = 1.
  void direct_rows_cpu(float* acc, int l, int64_t n, int64_t p0, int64_t o1, int64_t rows, int64_t ua,
                       int64_t ub) const {
    const int64_t* f = g.f[l];
    const int64_t C = g.c;
    // Channels-last rows are [w][z][c] interleaved; channels-first ones (and a
    // single channel) are unit-stride per channel (g.s[2] == 1).
    const bool last = g.interleaved();
    const int64_t r0 = g.per[l][0];
    const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2], len = rows * O2;
    const int64_t ystride = O0 * O1 * O2;  // between channels
    const float inv = g.inv[l];
    const int64_t seg = kAcc / ((last ? C : 1) * f[2]);  // outputs per segment
    for (int64_t u0 = ua; u0 < ub; ++u0) {
      const int64_t o0 = p0 * r0 + u0;
      const int64_t x01 = n * g.s_n + o0 * f[0] * g.s[0] + o1 * f[1] * g.s[1];
      float* const y0 = o.y[l] + ((n * C * O0 + o0) * O1 + o1) * O2;  // channel 0's row
      for (int64_t w0 = 0; w0 < len; w0 += seg) {
        const int64_t wn = w0 + seg < len ? seg : len - w0;
        if (last) {
          const int64_t x0 = x01 + w0 * f[2] * C;
          if (C == 4)
            block_f2<4>(acc, x0, wn, f, C, 0, y0 + w0, ystride, inv);
          else if (C == 3)
            block_f2<3>(acc, x0, wn, f, C, 0, y0 + w0, ystride, inv);
          else
            block_f2<0>(acc, x0, wn, f, C, 0, y0 + w0, ystride, inv);
        } else {
          for (int64_t c = 0; c < C; ++c)
            block_f2<1>(acc, x01 + c * g.s_c + w0 * f[2], wn, f, 1, c, y0 + c * ystride + w0, 0, inv);
        }
      }
    }
  }
};

}  // namespace mrmf::kernels
