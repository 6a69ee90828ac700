// The fused pooling-downsample kernel for raw scientific data: in ONE pass over
// the stored samples it
//   1. converts the stored element type (uint16, int16, float16 bits, float32) to float32,
//   2. applies an optional per-element transform (log1p, or per-channel x * scale + shift),
//   3. averages non-overlapping f0 x f1 x f2 blocks along the spatial axes (channels never),
//   4. changes the layout to channels-first [N, C, s0', s1', s2'] (input channels-last
//      [N, s..., C], or channels-first [N, C, s...] -- which is also how the Neuron
//      Inverter `x.view(-1, C, T)` quirk is expressed: the (N, T, C) memory read as (N, C, T)),
//   5. and can write several resolution levels at once (1/1 + 1/2 + 1/8 of a cube, ...).
//
// Multi-level design (why): one functor call owns one output position of the
// COARSEST level (block B = per-axis max of the levels' factors, every level's
// factor must divide B) for all channels, and writes every level's outputs
// that lie inside that block. The finest level is averaged from the input; a
// level whose factors are multiples of an earlier level's (1/8 after 1/1 or
// after 1/2 along x; 1/64 after 1/8) is averaged from that level's outputs,
// which the same call has just written and which are still in L1/L2 (on the
// GPU: the same thread's own stores, in L1/L2). So the input crosses the memory
// bus and is converted once whatever the number of levels, and each output
// element is written once; a derived level equals the direct average within
// float rounding (an average of averages), and the CPU rows and the GPU
// positions derive it in the same order, so the two give the same bits
// (log1p too: kernels/log1p.h is the project's own, the same operations on
// both sides, where CUDA's log1pf and glibc's differed by an ulp).
// Granularity: a call handles `chunk` consecutive coarse positions along the
// last spatial axis. The CPU backend uses whole rows (index arithmetic paid
// once per row; contiguous streams), the GPU one position per thread
// (neighbouring threads touch neighbouring addresses -> coalesced).
// Channels-last C = 4 data (CosmoFlow) has its own GPU traversals with
// 16-byte loads and the same sums: fused_downsample_vec.h (one level) and
// fused_downsample_chain.h (a chain of levels).
// Spatial dims are right-aligned in 3 slots: (N, T, C) -> in = (1, 1, T).
#pragma once

#include "core/prefetch.h"
#include "kernels/fastdiv.h"
#include "kernels/hd.h"
#include "kernels/log1p.h"
#include "kernels/log1p_products.h"
#if !defined(__CUDACC__)
#include "kernels/rows_avx2.h"
#include "kernels/rows_avx512.h"
#endif

namespace mrmf::kernels {

constexpr int kFusedMaxLevels = 4;
constexpr int kFusedMaxChannels = 8;

enum class RawType : int { U16 = 0, I16 = 1, F16 = 2, F32 = 3 };
enum class FusedTransform : int { None = 0, Log1p = 1, Scale = 2 };

// IEEE binary16 bits -> float32, exact (subnormals, inf, nan), host and device.
MRMF_HD MRMF_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
  }
  union {
    uint32_t u;
    float f;
  } cv{bits};
  return cv.f;
}

template <RawType R>
struct RawLoad;
template <>
struct RawLoad<RawType::U16> {
  using T = uint16_t;
  // 16-bit types: a transform may be a table of all 2^16 patterns (lut).
  static constexpr bool kBits16 = true;
  MRMF_HD MRMF_INLINE static uint32_t bits16(const T* p, int64_t i) { return p[i]; }
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return static_cast<float>(p[i]); }
  // The element whose bits are the low sizeof(T) bytes of `b` (vector loads).
  MRMF_HD MRMF_INLINE static float from_bits(uint32_t b) { return static_cast<float>(static_cast<T>(b)); }
};
template <>
struct RawLoad<RawType::I16> {
  using T = int16_t;
  static constexpr bool kBits16 = true;
  MRMF_HD MRMF_INLINE static uint32_t bits16(const T* p, int64_t i) { return static_cast<uint16_t>(p[i]); }
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return static_cast<float>(p[i]); }
  MRMF_HD MRMF_INLINE static float from_bits(uint32_t b) { return static_cast<float>(static_cast<T>(b & 0xFFFFu)); }
};
template <>
struct RawLoad<RawType::F16> {
  using T = uint16_t;
  static constexpr bool kBits16 = true;
  MRMF_HD MRMF_INLINE static uint32_t bits16(const T* p, int64_t i) { return p[i]; }
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return half_bits_to_float(p[i]); }
  MRMF_HD MRMF_INLINE static float from_bits(uint32_t b) { return half_bits_to_float(static_cast<uint16_t>(b)); }
};
template <>
struct RawLoad<RawType::F32> {
  using T = float;
  static constexpr bool kBits16 = false;
  MRMF_HD MRMF_INLINE static uint32_t bits16(const T*, int64_t) { return 0; }
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return p[i]; }
  MRMF_HD MRMF_INLINE static float from_bits(uint32_t b) {
    union {
      uint32_t u;
      float f;
    } cv{b};
    return cv.f;
  }
};

struct FusedGeom {
  int64_t n = 0, c = 0;
  int64_t in[3] = {1, 1, 1};
  int64_t s_n = 0, s_c = 0, s[3] = {0, 0, 0};  // input strides (elements)
  int64_t block[3] = {1, 1, 1};                // coarsest factors B
  int64_t nblk[3] = {1, 1, 1};                 // in / B
  int64_t chunk = 1, nchunk = 1;               // coarse positions per call along slot 2
  int64_t group1 = 1, ngrp1 = 1;               // coarse blocks per call along slot 1 (CPU slabs)
  int levels = 0;
  int64_t f[kFusedMaxLevels][3] = {};
  int64_t out[kFusedMaxLevels][3] = {};
  float inv[kFusedMaxLevels] = {};
  // Derived levels (see above): levels run in order[], and level l is
  // averaged from level src[l]'s outputs over r[l] blocks (scaled by inv_r[l]),
  // or from the input when src[l] < 0.
  int order[kFusedMaxLevels] = {};
  int src[kFusedMaxLevels] = {-1, -1, -1, -1};
  int64_t r[kFusedMaxLevels][3] = {};
  float inv_r[kFusedMaxLevels] = {};
  FusedTransform transform = FusedTransform::None;
  // The GPU may run channels-last C = 4 data with vector loads: one level
  // with fused_downsample_vec.h, a chain of levels with
  // fused_downsample_chain.h; false keeps the per-position kernels
  // (benchmarks time them side by side). The CPU ignores it.
  bool allow_vector = true;
  // log1p of a 16-bit stored type read from log1p_table() (false: computed
  // by log1p_f32; the same bits either way -- benchmarks time both).
  bool allow_table = true;
  // log1p of a 16-bit integer type averaged over blocks of 4 to 15
  // elements as one logarithm of the product of (1 + x)
  // (kernels/log1p_products.h); false sums per-element log1p (benchmarks
  // time both; the results differ within float rounding).
  bool allow_product = true;
  // The GPU chain kernel loads all of a block's input rows up front where a
  // block has at most 4 rows of a 2-byte type (fused_downsample_chain.h);
  // false keeps two rows in flight (benchmarks time both). On since its
  // first GPU run (H200, 2026-11-27, bench/results/gpu_2026-11-27d.md): the
  // 1/2 + 1/8 CosmoFlow ladder went from 76 % to 90 % of a device copy.
  bool chain_preload = true;
  // The GPU vector kernel (one level) loads all of a block's input rows up
  // front where a block has 2 to 4 rows of a 2-byte type
  // (fused_downsample_vec.h); false, the default until it is measured on a
  // GPU, loads one row at a time. bench_data's GPU table rows time both.
  bool vector_preload = false;
  // The GPU kernel the dispatch chose (it sets chunk to match).
  enum class GpuKernel : int { Positions = 0, Vector = 1, Chain = 2 };
  GpuKernel gpu_kernel = GpuKernel::Positions;
  float scale[kFusedMaxChannels] = {}, shift[kFusedMaxChannels] = {};
  FastDiv chunk_div, nblk1_div, nblk0_div;  // set by finalize() (host)
  // block / f[l]: level l's outputs per coarse block along each axis. Set by
  // finalize(): on the GPU a 64-bit division is a software routine of ~100
  // instructions, and the traversal needed three per level per position.
  int64_t per[kFusedMaxLevels][3] = {};

  void finalize() {
    for (int l = 0; l < levels; ++l)
      for (int d = 0; d < 3; ++d) per[l][d] = block[d] / f[l][d];
    nchunk = (nblk[2] + chunk - 1) / chunk;
    ngrp1 = (nblk[1] + group1 - 1) / group1;
    chunk_div = FastDiv(nchunk);
    nblk1_div = FastDiv(ngrp1);
    nblk0_div = FastDiv(nblk[0]);
  }
  int64_t calls() const { return n * nblk[0] * ngrp1 * nchunk; }
  // Channels-last input of several channels: a row interleaves them.
  MRMF_HD bool interleaved() const { return s_c == 1 && c > 1; }
};

struct FusedOutputs {
  float* y[kFusedMaxLevels] = {};
};

// R: stored type; TF: the transform (compile-time, so the CPU loops have no
// per-element branch). g.transform must equal TF.
template <RawType R, FusedTransform TF>
struct FusedDownsample {
  using T = typename RawLoad<R>::T;
  const T* x;
  FusedOutputs o;
  FusedGeom g;
  // log1p of every 16-bit pattern of R, indexed by an element's bits, where
  // TF is Log1p and R a 16-bit type (run2() sets it: log1p_table() on the
  // CPU, a device copy of it on the GPU); null computes log1p per element.
  // Why: log1p_f32's ~40 operations (two IEEE divisions on the GPU) made
  // the kernel compute-bound -- 1/1 with log1p at 34 % of a device copy on
  // an H200 and 28 % of memcpy on the CPU, against 87-91 % without. The
  // table holds log1p_f32's own results, so the bits do not change.
  const float* lut = nullptr;

  MRMF_HD MRMF_INLINE float lut_at(uint32_t bits) const {
#if defined(__CUDA_ARCH__)
    return __ldg(lut + bits);  // read-only cache: 256 KB, mostly a few lines hot (counts are small)
#else
    return lut[bits];
#endif
  }

  MRMF_HD MRMF_INLINE bool by_table() const { return TF == FusedTransform::Log1p && RawLoad<R>::kBits16 && lut; }

  // Products (kernels/log1p_products.h): whether a block of `cells` input
  // elements is reduced as the product of count factors, one logarithm per
  // output. Every traversal asks this for the same blocks, so the CPU and
  // GPU bits stay equal.
  static constexpr bool kProducts = TF == FusedTransform::Log1p && (R == RawType::U16 || R == RawType::I16);
  MRMF_HD MRMF_INLINE bool by_product(int64_t cells) const {
    return kProducts && g.allow_product && cells >= kFusedProductMinCells && cells <= kFusedProductMaxCells;
  }
  MRMF_HD MRMF_INLINE static float factor_of_bits(uint32_t b) { return count_factor<R == RawType::I16>(b); }
  // The block's sum of log1p from the product of its `cells` factors.
  MRMF_HD MRMF_INLINE static float log_of_product(float p, int64_t cells) {
    return log_of_count_product<R == RawType::I16>(p, cells);
  }
  MRMF_HD MRMF_INLINE float factor(int64_t idx) const { return factor_of_bits(RawLoad<R>::bits16(x, idx)); }

  // Element idx of channel c, converted and transformed.
  MRMF_HD MRMF_INLINE float value(int64_t idx, int64_t c) const {
    if (by_table()) return lut_at(RawLoad<R>::bits16(x, idx));
    return transform(RawLoad<R>::get(x, idx), c);
  }

  // The same for an element given by its bits (the low sizeof(T) bytes of
  // `b`; the vector kernels' loads).
  MRMF_HD MRMF_INLINE float value_of_bits(uint32_t b, int64_t c) const {
    if (by_table()) return lut_at(b & 0xFFFFu);
    return transform(RawLoad<R>::from_bits(b), c);
  }

  // The per-element transform of an already converted value of channel c.
  MRMF_HD MRMF_INLINE float transform(float v, int64_t c) const {
    if (TF == FusedTransform::Log1p) return log1p_f32(v);
    if (TF == FusedTransform::Scale) {
#if defined(__CUDA_ARCH__)
      return __fadd_rn(__fmul_rn(v, g.scale[c]), g.shift[c]);  // never contracted into an FMA: the CPU's bits
#else
      return v * g.scale[c] + g.shift[c];
#endif
    }
    return v;
  }

  // Summation order, shared by both traversals so that they give the same
  // bits: per output, for each z along the last axis, the f0 x f1 values at
  // that z are summed in (a, b) order starting from the first one; then
  // those per-z sums are added to 0 in z order. (The CPU rows keep the
  // per-z sums as unit-stride running sums over whole input rows.) Blocks
  // that by_product() takes follow the same order with products of count
  // factors (multiplied into 1 over z), then one logarithm per output
  // (kernels/log1p_products.h).
  MRMF_HD void operator()(int64_t i) const {
    const int64_t j2 = i - g.chunk_div(i) * g.nchunk;
    int64_t q = g.chunk_div(i);
    const int64_t j1 = q - g.nblk1_div(q) * g.ngrp1;
    q = g.nblk1_div(q);
    const int64_t p0 = q - g.nblk0_div(q) * g.nblk[0];
    const int64_t n = g.nblk0_div(q);
    const int64_t p2_begin = j2 * g.chunk;
    const int64_t p2_end = min_of(p2_begin + g.chunk, g.nblk[2]);
    const int64_t p1_end = min_of((j1 + 1) * g.group1, g.nblk[1]);
    for (int64_t p1 = j1 * g.group1; p1 < p1_end; ++p1)  // group1 = 1 on the GPU
      for (int k = 0; k < g.levels; ++k) {
        const int l = g.order[k];
        if (g.src[l] < 0)
          level_outputs(l, n, p0, p1, p2_begin, p2_end);
        else
          derived_outputs(l, n, p0, p1, p2_begin, p2_end);
      }
  }

  // The per-position traversals below (the GPU's: one coarse position per
  // thread) keep every channel's values of one block element in flight at
  // once -- channel innermost, C independent loads -- instead of one load
  // whose use waits for it before the next is issued. On an H100 the
  // one-load-at-a-time version moved 18-25 % of a device copy's bandwidth
  // (session 13): about what one outstanding 2-byte load per thread at the
  // occupancy its 116-126 registers allowed (two 256-thread blocks per SM)
  // can sustain by Little's law. Each channel's additions keep their order
  // (the bits are unchanged); C <= kFusedMaxChannels, the per-channel
  // arrays unrolled into registers.

  // A single level read from the input (every loader's case): one output
  // position, all channels, per call -- the same sums in the same order as
  // level_outputs() -- without the multi-level traversal's loop nest, so
  // that the GPU can run it as its own kernel (FusedDownsampleOne) with few
  // registers (see fused_downsample_ops.inl). Requires levels == 1 and the
  // GPU geometry (chunk == group1 == 1: calls() counts output positions,
  // and the block is f[0]).
  MRMF_HD void one_level(int64_t i) const {
    int64_t q = g.chunk_div(i);
    const int64_t o2 = i - q * g.nchunk;
    const int64_t q1 = g.nblk1_div(q);
    const int64_t o1 = q - q1 * g.ngrp1;
    const int64_t n = g.nblk0_div(q1);
    const int64_t o0 = q1 - n * g.nblk[0];
    const int64_t f0 = g.f[0][0], f1 = g.f[0][1], f2 = g.f[0][2];
    const int64_t C = g.c, plane = g.out[0][0] * g.out[0][1] * g.out[0][2];
    float acc[kFusedMaxChannels];
    block_sums(n * g.s_n + o0 * f0 * g.s[0] + o1 * f1 * g.s[1] + o2 * f2 * g.s[2], f0, f1, f2, acc);
    float* const y = o.y[0] + n * C * plane + (o0 * g.out[0][1] + o1) * g.out[0][2] + o2;
    MRMF_UNROLL
    for (int c = 0; c < kFusedMaxChannels; ++c)
      if (c < C) y[c * plane] = acc[c] * g.inv[0];
  }

  // acc[c] = channel c's sum over the f0 x f1 x f2 input block at `col0`,
  // in the order of the header's summation rule (per z, the f0 x f1 values
  // in (a, b) order from the first; the per-z sums added to 0 in z order).
  // Where by_product(): the sum of log1p as the logarithm of the block's
  // product, multiplied in the same order (per z, the f0 x f1 factors in
  // (a, b) order from the first; the per-z products multiplied into 1 in z
  // order).
  MRMF_HD MRMF_INLINE void block_sums(int64_t col0, int64_t f0, int64_t f1, int64_t f2, float* acc) const {
    if constexpr (kProducts) {
      if (by_product(f0 * f1 * f2)) {
        block_fold<true>(col0, f0, f1, f2, acc);
        MRMF_UNROLL
        for (int c = 0; c < kFusedMaxChannels; ++c)
          if (c < g.c) acc[c] = log_of_product(acc[c], f0 * f1 * f2);
        return;
      }
    }
    block_fold<false>(col0, f0, f1, f2, acc);
  }

  // The fold of block_sums(): kProd multiplies count factors into 1, else
  // values are added to 0 (fold_start/fold_step, kernels/log1p_products.h;
  // input() below).
  template <bool kProd>
  MRMF_HD MRMF_INLINE void block_fold(int64_t col0, int64_t f0, int64_t f1, int64_t f2, float* acc) const {
    const int64_t C = g.c;
    MRMF_UNROLL
    for (int c = 0; c < kFusedMaxChannels; ++c) acc[c] = fold_start<kProd>();
    MRMF_NO_UNROLL
    for (int64_t z = 0; z < f2; ++z) {
      const int64_t col = col0 + z * g.s[2];
      float t[kFusedMaxChannels];
      MRMF_UNROLL
      for (int c = 0; c < kFusedMaxChannels; ++c) t[c] = c < C ? input<kProd>(col + c * g.s_c, c) : 0.f;
      MRMF_NO_UNROLL
      for (int64_t a = 0; a < f0; ++a) {
        MRMF_NO_UNROLL
        for (int64_t b = 0; b < f1; ++b)
          if (a != 0 || b != 0) {
            const int64_t e = col + a * g.s[0] + b * g.s[1];
            MRMF_UNROLL
            for (int c = 0; c < kFusedMaxChannels; ++c)
              if (c < C) t[c] = fold_step<kProd>(t[c], input<kProd>(e + c * g.s_c, c));
          }
      }
      MRMF_UNROLL
      for (int c = 0; c < kFusedMaxChannels; ++c)
        if (c < C) acc[c] = fold_step<kProd>(acc[c], t[c]);
    }
  }

  // Element idx of channel c as a block folds it: its count factor where
  // kProd, else its converted, transformed value.
  template <bool kProd>
  MRMF_HD MRMF_INLINE float input(int64_t idx, int64_t c) const {
    if constexpr (kProd)
      return factor(idx);
    else
      return value(idx, c);
  }

  // Level l's outputs inside coarse block (n, p0, p1), [p2_begin, p2_end),
  // averaged from level m = src[l]'s outputs: the same summation order as
  // from the input (per z, the r0 x r1 values in (a, b) order from the first;
  // the per-z sums added to 0 in z order), then scaled by inv_r.
  MRMF_HD MRMF_HOST_NOINLINE void derived_outputs(int l, int64_t n, int64_t p0, int64_t p1, int64_t p2_begin,
                                                  int64_t p2_end) const {
    const int m = g.src[l];
    const int64_t q0 = g.r[l][0], q1 = g.r[l][1], q2 = g.r[l][2];
    const int64_t r0 = g.per[l][0], r1 = g.per[l][1], r2 = g.per[l][2];
    const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2];
    const int64_t M0 = g.out[m][0], M1 = g.out[m][1], M2 = g.out[m][2];
    const int64_t C = g.c, ystride = O0 * O1 * O2, mstride = M0 * M1 * M2;  // between channels
    const float inv = g.inv_r[l];
    for (int64_t u0 = 0; u0 < r0; ++u0)
      for (int64_t u1 = 0; u1 < r1; ++u1) {
        const int64_t o0 = p0 * r0 + u0, o1 = p1 * r1 + u1;
        float* const yrow = o.y[l] + ((n * C * O0 + o0) * O1 + o1) * O2;  // channel 0's
        const float* const src = o.y[m] + ((n * C * M0 + o0 * q0) * M1 + o1 * q1) * M2;
        for (int64_t o2 = p2_begin * r2; o2 < p2_end * r2; ++o2) {
          float acc[kFusedMaxChannels];
          MRMF_UNROLL
          for (int c = 0; c < kFusedMaxChannels; ++c) acc[c] = 0.f;
          for (int64_t z = 0; z < q2; ++z) {
            const float* const col = src + o2 * q2 + z;
            float t[kFusedMaxChannels];
            MRMF_UNROLL
            for (int c = 0; c < kFusedMaxChannels; ++c) t[c] = c < C ? col[c * mstride] : 0.f;
            for (int64_t a = 0; a < q0; ++a)
              for (int64_t b = 0; b < q1; ++b)
                if (a != 0 || b != 0) {
                  const float* const v = col + (a * M1 + b) * M2;
                  MRMF_UNROLL
                  for (int c = 0; c < kFusedMaxChannels; ++c)
                    if (c < C) t[c] += v[c * mstride];
                }
            MRMF_UNROLL
            for (int c = 0; c < kFusedMaxChannels; ++c)
              if (c < C) acc[c] += t[c];
          }
          MRMF_UNROLL
          for (int c = 0; c < kFusedMaxChannels; ++c)
            if (c < C) yrow[c * ystride + o2] = acc[c] * inv;
        }
      }
  }

  // Level l's outputs inside coarse block (n, p0, p1) for the coarse
  // positions [p2_begin, p2_end) along the last axis, one output position
  // (all channels) at a time; along o2 the writes are contiguous.
  MRMF_HD MRMF_HOST_NOINLINE void level_outputs(int l, int64_t n, int64_t p0, int64_t p1, int64_t p2_begin,
                                                int64_t p2_end) const {
    const int64_t f0 = g.f[l][0], f1 = g.f[l][1], f2 = g.f[l][2];
    const int64_t r0 = g.per[l][0], r1 = g.per[l][1], r2 = g.per[l][2];
    const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2];
    const int64_t C = g.c, ystride = O0 * O1 * O2;  // between channels
    const float inv = g.inv[l];
    for (int64_t u0 = 0; u0 < r0; ++u0)
      for (int64_t u1 = 0; u1 < r1; ++u1) {
        const int64_t o0 = p0 * r0 + u0, o1 = p1 * r1 + u1;
        const int64_t x01 = n * g.s_n + o0 * f0 * g.s[0] + o1 * f1 * g.s[1];
        float* const yrow = o.y[l] + ((n * C * O0 + o0) * O1 + o1) * O2;  // channel 0's
        for (int64_t o2 = p2_begin * r2; o2 < p2_end * r2; ++o2) {
          float acc[kFusedMaxChannels];
          block_sums(x01 + o2 * f2 * g.s[2], f0, f1, f2, acc);
          MRMF_UNROLL
          for (int c = 0; c < kFusedMaxChannels; ++c)
            if (c < C) yrow[c * ystride + o2] = acc[c] * inv;
        }
      }
  }

#if !defined(__CUDACC__)
  // The CPU traversal of the same math (host only, g.chunk = whole rows).
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
    float t[kAcc / 2];  // wn * C <= kAcc / f2
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

  // derived_outputs() over whole rows: per output row and segment, the
  // q0 x q1 source rows summed into acc (unit stride, in (a, b) order from
  // the first; up to four rows per pass over acc), then each output the sum
  // from 0 of its q2 neighbours, scaled.
  template <int kQ2>
  static void derived_seg(float* acc, const float* src, int64_t rowstep0, int64_t rowstep1, int64_t q0, int64_t q1,
                          int64_t q2_rt, int64_t wn, float* y, float inv) {
    const int64_t q2 = kQ2 > 0 ? kQ2 : q2_rt, len = wn * q2, rows = q0 * q1;
    const auto row = [&](int64_t k) { return src + (k / q1) * rowstep0 + (k % q1) * rowstep1; };
    int64_t k = 0;
    if (rows >= 4) {
      const float *r0 = row(0), *r1 = row(1), *r2 = row(2), *r3 = row(3);
      for (int64_t j = 0; j < len; ++j) acc[j] = r0[j] + r1[j] + r2[j] + r3[j];
      k = 4;
    } else if (rows >= 2) {
      const float *r0 = row(0), *r1 = row(1);
      for (int64_t j = 0; j < len; ++j) acc[j] = r0[j] + r1[j];
      k = 2;
    } else {
      const float* r0 = row(0);
      for (int64_t j = 0; j < len; ++j) acc[j] = r0[j];
      k = 1;
    }
    for (; k < rows; ++k) {
      const float* const rk = row(k);
      for (int64_t j = 0; j < len; ++j) acc[j] += rk[j];
    }
    for (int64_t w = 0; w < wn; ++w) {
      float s = 0.f;
      for (int64_t z = 0; z < q2; ++z) s += acc[w * q2 + z];
      y[w] = s * inv;
    }
  }

  // The input lines the next direct rows will read, `per_row` of them
  // prefetched before each derived output row (see row_cpu()): the lines
  // that hold [base, base + bytes), from the one holding base (which may
  // start before base, and before the input: integer addresses, not
  // pointers stepped outside it).
  struct InputLead {
    const char* base = nullptr;
    int64_t bytes = 0, done = 0, per_row = 0;  // done: lines issued
    uintptr_t first_line() const { return reinterpret_cast<uintptr_t>(base) & ~uintptr_t(63); }
    int64_t lines() const {
      return bytes > 0 ? static_cast<int64_t>((reinterpret_cast<uintptr_t>(base) + bytes - 1 - first_line()) / 64) + 1
                       : 0;
    }
    // At most this many lines per derived row: a stretch far longer than
    // its derived rows (a 1-D series: the whole next sample for C derived
    // rows) would otherwise go out as a burst, which the header measured
    // as harmful (kPrefetchBytes) and which evicts the rows being summed.
    static constexpr int64_t kMaxLinesPerRow = 16;
    void spread_over(int64_t rows) {
      per_row = rows > 0 ? (lines() + rows - 1) / rows : 0;
      if (per_row > kMaxLinesPerRow) per_row = kMaxLinesPerRow;
    }
    MRMF_INLINE void step() {
      const int64_t n = lines();
      for (int64_t k = 0; k < per_row && done < n; ++k, ++done)
        prefetch_line(reinterpret_cast<const char*>(first_line() + 64 * static_cast<uintptr_t>(done)));
    }
  };

  // Rows u0 in [ua, ub) of level l's outputs in coarse block (n, p0, p1).
  void derived_rows_cpu(float* acc, int l, int64_t n, int64_t p0, int64_t p1, int64_t ua, int64_t ub,
                        InputLead& lead) const {
    const int m = g.src[l];
    const int64_t q0 = g.r[l][0], q1 = g.r[l][1], q2 = g.r[l][2];
    const int64_t r0 = g.per[l][0], r1 = g.per[l][1];
    const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2];
    const int64_t M0 = g.out[m][0], M1 = g.out[m][1], M2 = g.out[m][2];
    const int64_t seg = kAcc / q2;  // outputs per segment
    for (int64_t u0 = ua; u0 < ub; ++u0)
      for (int64_t u1 = 0; u1 < r1; ++u1) {
        const int64_t o0 = p0 * r0 + u0, o1 = p1 * r1 + u1;
        for (int64_t c = 0; c < g.c; ++c) {
          float* const yrow = o.y[l] + (((n * g.c + c) * O0 + o0) * O1 + o1) * O2;
          const float* const src = o.y[m] + (((n * g.c + c) * M0 + o0 * q0) * M1 + o1 * q1) * M2;
          // The row this channel writes next, fetched while this one is
          // summed: a derived level's work between its stores is short (a
          // few cached loads per output), and each store to a line not yet
          // in cache held the rows behind it until the line came from
          // memory. In-process A/B on the 2-core Milan VM: the CosmoFlow
          // ladder and three levels 5-11 % less time
          // (bench/results/cpu_data_2026-11-29c.txt). At most its first
          // 1 KB: rows of whole planes (no level averages along axis 1) are
          // long streams, which the hardware prefetcher follows.
          prefetch_bytes(yrow + O2, static_cast<size_t>(O2 < 256 ? O2 : 256) * sizeof(float));
          lead.step();
          for (int64_t w0 = 0; w0 < O2; w0 += seg) {
            const int64_t wn = w0 + seg < O2 ? seg : O2 - w0;
            const float* const s0 = src + w0 * q2;
            if (q2 == 1)
              derived_seg<1>(acc, s0, M1 * M2, M2, q0, q1, 1, wn, yrow + w0, g.inv_r[l]);
            else if (q2 == 2)
              derived_seg<2>(acc, s0, M1 * M2, M2, q0, q1, 2, wn, yrow + w0, g.inv_r[l]);
            else if (q2 == 4)
              derived_seg<4>(acc, s0, M1 * M2, M2, q0, q1, 4, wn, yrow + w0, g.inv_r[l]);
            else
              derived_seg<0>(acc, s0, M1 * M2, M2, q0, q1, q2, wn, yrow + w0, g.inv_r[l]);
          }
        }
      }
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

  // CPU call i's coarse blocks: sample n, block p0 along axis 0, blocks
  // [p1a, p1b) along axis 1 (group j1 of group1 blocks). The CPU geometry
  // has whole rows per call (nchunk == 1, set_cpu_rows_geometry), so i has
  // no chunk index j2, unlike operator()'s.
  struct Slab {
    int64_t n, p0, p1a, p1b;
  };
  Slab slab_of(int64_t i) const {
    const int64_t j1 = i - g.nblk1_div(i) * g.ngrp1, q = g.nblk1_div(i);
    const int64_t p1a = j1 * g.group1;
    return {g.nblk0_div(q), q - g.nblk0_div(q) * g.nblk[0], p1a,
            p1a + g.group1 < g.nblk[1] ? p1a + g.group1 : g.nblk[1]};
  }

  // Input plane `t` of call i's slab (t == block[0]: plane 0 of call
  // i + 1, the next call of the thread's contiguous range except at its
  // end), as a byte range; empty where the slab's rows are not one stretch
  // (several channels first) or there is no next call. t in [1, block[0]];
  // i = -1 only with t == block[0] (call 0's first plane).
  void plane_stretch(int64_t i, int64_t t, InputLead& lead) const {
    if (t == g.block[0]) {
      ++i;
      t = 0;
    }
    const bool rows_contiguous = (g.interleaved() || g.c == 1) && g.s[1] == g.in[2] * g.s[2];
    if (i >= g.calls() || !rows_contiguous) return;
    const Slab b = slab_of(i);
    const T* const first = x + b.n * g.s_n + (b.p0 * g.block[0] + t) * g.s[0] + b.p1a * g.block[1] * g.s[1];
    lead.base = reinterpret_cast<const char*>(first);
    lead.bytes = (b.p1b - b.p1a) * g.block[1] * g.s[1] * static_cast<int64_t>(sizeof(T));
  }

  // One CPU call: the coarse blocks (n, p0, p1) for the p1 of group j1, as a
  // slab. A level with f1 = 1 streams each of its input planes' rows for the
  // whole group as one stretch (long contiguous reads, what the hardware
  // prefetcher needs; block by block they were 1 KB bursts from planes 128 KB
  // apart); the group is sized by kSlabBytes (set_cpu_rows_geometry,
  // fused_downsample_ops.cpp).
  // The levels advance together along axis 0: after each input plane of the
  // block, every level computes the output rows whose inputs (or source
  // level's rows) are now complete. A derived level thus reads back rows
  // written a plane or two before, while still in L2, instead of after the
  // whole slab. Each output's sums are the same in the same order; only the
  // order in which outputs are computed changes.
  // While derived levels sum (cached rows, no input read), the next input
  // plane's lines are prefetched a few per derived output row (InputLead):
  // otherwise the memory bus idles through those sums, and the next direct
  // rows start on cold lines. Spread evenly over the derived rows: the
  // same lines in the first half of them measured no better. Session 45,
  // Emerald Rapids VM, alternating A/B: 1/1 + 1/8 + 1/64 71-79 -> 76-81 %
  // of memcpy, medians 76 -> 79 (bench/results/cpu_data_2026-11-30d.txt);
  // the CosmoFlow ladder level in a run of its own (its derived 1/8 is
  // short next to two planes read at once).
  void row_cpu(int64_t i) const {
    const auto [n, p0, p1a, p1b] = slab_of(i);
    float acc[kAcc];
    int64_t done[kFusedMaxLevels] = {};  // output rows along axis 0 finished, per level
    for (int64_t t = 1; t <= g.block[0]; ++t) {
      // Each level's rows [ua, ub) along axis 0 that plane t completes.
      int64_t ua[kFusedMaxLevels] = {}, ub[kFusedMaxLevels] = {}, derived_rows = 0;
      for (int k = 0; k < g.levels; ++k) {
        const int l = g.order[k];
        const bool derived = g.src[l] >= 0;
        ua[k] = ub[k] = done[l];
        if (plain_level(l)) {
          if (t == g.block[0]) ub[k] = g.per[l][0];
        } else {
          const int64_t ready = derived ? done[g.src[l]] / g.r[l][0] : t / g.f[l][0];
          if (ready > ua[k]) ub[k] = ready;
          if (derived) derived_rows += (ub[k] - ua[k]) * (p1b - p1a) * g.per[l][1] * g.c;
        }
        done[l] = ub[k];
      }
      InputLead lead;
      if (derived_rows > 0) {
        plane_stretch(i, t, lead);
        lead.spread_over(derived_rows);
      }
      for (int k = 0; k < g.levels; ++k) {
        const int l = g.order[k];
        const int64_t* f = g.f[l];
        const int64_t r1 = g.per[l][1];
        if (ub[k] <= ua[k]) continue;
        if (plain_level(l)) {
          for (int64_t p1 = p1a; p1 < p1b; ++p1)
            g.src[l] >= 0 ? derived_outputs(l, n, p0, p1, 0, g.nblk[2]) : level_outputs(l, n, p0, p1, 0, g.nblk[2]);
        } else if (g.src[l] >= 0) {
          for (int64_t p1 = p1a; p1 < p1b; ++p1) derived_rows_cpu(acc, l, n, p0, p1, ua[k], ub[k], lead);
        } else if (f[1] == 1) {
          direct_rows_cpu(acc, l, n, p0, p1a * r1, (p1b - p1a) * r1, ua[k], ub[k]);
        } else {
          for (int64_t o1 = p1a * r1; o1 < p1b * r1; ++o1) direct_rows_cpu(acc, l, n, p0, o1, 1, ua[k], ub[k]);
        }
      }
    }
  }

  // The plain-loop fallbacks (one output's inputs overflow the accumulator)
  // run a whole block at once, after its last plane.
  bool plain_level(int l) const {
    return g.src[l] >= 0 ? g.r[l][2] > kAcc : (g.interleaved() ? g.c : 1) * g.f[l][2] > kAcc;
  }
#endif
};

// The single-level kernel (see one_level()).
template <RawType R, FusedTransform TF>
struct FusedDownsampleOne {
  FusedDownsample<R, TF> f;
  MRMF_HD void operator()(int64_t i) const { f.one_level(i); }
};

}  // namespace mrmf::kernels
