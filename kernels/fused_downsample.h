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
// once per row; contiguous streams: kernels/fused_downsample_rows.h over
// kernels/fused_downsample_segments.h, which derives from this functor),
// the GPU one position per thread
// (neighbouring threads touch neighbouring addresses -> coalesced).
// Channels-last C = 4 data (CosmoFlow) has its own GPU traversals with
// 16-byte loads and the same sums: fused_downsample_vec.h (one level) and
// fused_downsample_chain.h (a chain of levels).
// Spatial dims are right-aligned in 3 slots: (N, T, C) -> in = (1, 1, T).
#pragma once

#include "kernels/fastdiv.h"
#include "kernels/hd.h"
#include "kernels/log1p.h"
#include "kernels/log1p_products.h"

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
};

// The single-level kernel (see one_level()).
template <RawType R, FusedTransform TF>
struct FusedDownsampleOne {
  FusedDownsample<R, TF> f;
  MRMF_HD void operator()(int64_t i) const { f.one_level(i); }
};

}  // namespace mrmf::kernels
