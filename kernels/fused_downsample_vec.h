// The fused downsample's single-level kernel for channels-last data with
// whole-vector loads: the CosmoFlow case (C = 4 channels interleaved per
// voxel, 2-byte counts), what every GPU loader of CosmoFlow runs.
//
// Why a second single-level traversal: FusedDownsample::one_level() owns one
// output position per thread and loads its inputs element by element. For
// a 2-byte type that is C loads of 2 bytes per block element, with one
// block element's loads in flight per thread (its loops must stay rolled to
// hold the registers): on an H100 the per-position kernel moved 46-50 % of
// a device copy's bandwidth (18-25 % before session 14 loaded the C
// channels together). This one moves 85-97 % (session 20,
// bench/results/gpu_2026-11-26.md). Here one call owns kV
// consecutive outputs along the last axis, all channels. For each of the
// block's f0 x f1 input rows its inputs are ONE contiguous run of
// kV * kF2 * C = 16 elements (32 or 64 bytes), read with 16-byte loads that
// are all in flight together; each channel's kV outputs are written with
// one vector store (128-bit at kV = 4).
//
// Same sums in the same order as block_sums() (the header's summation
// rule), so the bits equal the CPU rows and the per-position kernel: per
// INPUT position (w, z, c) a running sum over the f0 x f1 rows in (a, b)
// order starting from the first row's value (what the CPU's seg_add keeps),
// then per output the sum from 0 over z, times 1/|block|.
//
// Preconditions (fused_vector_f2() and the dispatch check them): one level,
// channels-last (s_c == 1, s[2] == C) with C == kC, f[2] == kF2, out[2] a
// multiple of kV, the input 16-byte aligned, the output aligned to kV floats
// (up to 16 bytes); g.chunk == kV and g.group1 == 1, finalize()d, so that
// calls() counts the groups of kV outputs. The preloading variant (kPre)
// also needs a 2-byte stored type and 2 to kFusedVecPreloadRows rows per
// block (fused_vector_preloadable(); with_vector_kernel() checks it): rows
// past that bound would be left out of the sums.
#pragma once

#include <cstring>

#include "kernels/fused_downsample.h"

namespace mrmf::kernels {

// Input elements per row segment: 32 bytes of 2-byte counts (two 16-byte
// loads), 64 bytes of float32 (four). Twice that for 2-byte types spilled
// under the 64-register bound (ptxas, sm_90): the 32 running sums and the
// 16 words of raw input no longer fit beside the indices.
constexpr int64_t kFusedVecElems = 16;
constexpr int64_t kFusedVecChannels = 4;

// Outputs per call along the last axis for last-axis factor f2 (0 where the
// factor does not divide a segment's positions).
MRMF_HD MRMF_INLINE constexpr int64_t fused_vector_width(int64_t f2) {
  return (kFusedVecElems / kFusedVecChannels) % f2 == 0 ? kFusedVecElems / kFusedVecChannels / f2 : 0;
}

// The last-axis factor the vector kernel would run `g` with (1, 2 or 4), or 0
// where it does not apply. Pointer alignment is the caller's to check.
inline int64_t fused_vector_f2(const FusedGeom& g) {
  if (g.levels != 1 || g.s_c != 1 || g.c != kFusedVecChannels || g.s[2] != g.c) return 0;
  const int64_t f2 = g.f[0][2];
  if (f2 != 1 && f2 != 2 && f2 != 4) return 0;
  const int64_t v = fused_vector_width(f2);
  return v > 0 && g.out[0][2] % v == 0 ? f2 : 0;
}

// 16 bytes of raw elements, loaded in one instruction on the GPU.
struct alignas(16) Raw16 {
  uint32_t w[4];
};

MRMF_HD MRMF_INLINE Raw16 load_raw16(const void* p) {
  Raw16 r;
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(static_cast<const uint4*>(p));
  r.w[0] = v.x;
  r.w[1] = v.y;
  r.w[2] = v.z;
  r.w[3] = v.w;
#else
  std::memcpy(&r, p, sizeof r);
#endif
  return r;
}

// One row segment of kFusedVecElems elements of type T: its 16-byte loads,
// all issued together, and element k's converted, transformed value (the
// transform's channel is k % C: the segment starts at a position).
template <class T>
struct RawSegment {
  static constexpr int kLoads = static_cast<int>(kFusedVecElems * sizeof(T) / 16);
  Raw16 r[kLoads];

  MRMF_HD MRMF_INLINE void load(const T* row) {
    MRMF_UNROLL
    for (int k = 0; k < kLoads; ++k) r[k] = load_raw16(row + k * (16 / sizeof(T)));
  }
  // Element k's bits in the low sizeof(T) bytes.
  MRMF_HD MRMF_INLINE uint32_t bits(int k) const {
    const int e = k * static_cast<int>(sizeof(T));      // byte offset in the segment
    return r[e / 16].w[(e % 16) / 4] >> (8 * (e % 4));  // little-endian: element k's bytes
  }
  // kProd: its count factor (kernels/log1p_products.h), else its value.
  template <bool kProd, RawType R, FusedTransform TF>
  MRMF_HD MRMF_INLINE float input(const FusedDownsample<R, TF>& f, int k) const {
    if constexpr (kProd)
      return f.factor_of_bits(bits(k));
    else
      return f.value_of_bits(bits(k), k % kFusedVecChannels);
  }
};

// kN consecutive floats (kN * 4 bytes aligned) in 16-, 8- or 4-byte stores.
template <int kN>
MRMF_HD MRMF_INLINE void store_floats(float* y, const float* v) {
#if defined(__CUDA_ARCH__)
  if constexpr (kN % 4 == 0) {
    MRMF_UNROLL
    for (int k = 0; k < kN; k += 4) *reinterpret_cast<float4*>(y + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
  } else if constexpr (kN == 2) {
    *reinterpret_cast<float2*>(y) = make_float2(v[0], v[1]);
  } else
#endif
  {
    MRMF_UNROLL
    for (int k = 0; k < kN; ++k) y[k] = v[k];
  }
}

// Input rows the vector kernel may preload (kPre below): a block of at most
// this many rows of a 2-byte type (CosmoFlow's 1/8 has 2 x 2).
constexpr int kFusedVecPreloadRows = 4;

// kPre: false (the default kernel) loads a row's segment, adds it, then
// loads the next row -- one row's loads in flight per thread; true issues
// every row's loads before the first addition, for blocks of 2 to
// kFusedVecPreloadRows rows of a 2-byte type (fused_vector_preloadable();
// FusedGeom::vector_preload asks for it). Why the second: with log1p read
// from the table each row's 16 values wait for 16 table loads after their
// own load, so the next row's load leaves later and fewer bytes are in
// flight -- 1/8 with log1p on counts ran at 71 % of a device copy against
// 91 % without log1p (H200, bench/results/gpu_2026-11-27d.md), where the
// chain kernel's preloading variant took the CosmoFlow ladder from 76 to
// 90 %. Not yet measured on a GPU: off by default. Same sums in the same
// order either way: only the loads move.
//
// kProd: the block is reduced by products (FusedDownsample::by_product():
// log1p of 16-bit counts; kernels/log1p_products.h), the running sums
// becoming running products of count factors and each output one
// logarithm, in the same order.
template <RawType R, FusedTransform TF, int kF2, bool kPre = false, bool kProd = false>
struct FusedDownsampleVec {
  using T = typename RawLoad<R>::T;
  static constexpr int kC = static_cast<int>(kFusedVecChannels);
  static constexpr int kV = static_cast<int>(fused_vector_width(kF2));
  static constexpr int kP = kV * kF2 * kC;  // elements per row segment
  static_assert(kV >= 1 && kP == kFusedVecElems, "a segment is kFusedVecElems elements");
  static_assert(!kPre || sizeof(T) == 2, "preloading is for 2-byte stored types");
  static_assert(!kProd || FusedDownsample<R, TF>::kProducts, "products are for log1p of 16-bit integers");
  // Resident 256-thread blocks per SM the launch asks for: 4 (64 registers)
  // where one row is in flight; at least 2 (128) for preloading, whose four
  // rows' 32 registers of raw input spilled 96-388 bytes at 64 (ptxas -v,
  // sm_90; log1p and float16 the most) and take 78-97 at 128, without
  // spills (3 blocks fit at up to 80). For 4-row blocks that is at least
  // half the threads with four times the rows in flight each; for 2-row
  // blocks about break-even -- what the benchmark's rows decide.
  static constexpr int kMinBlocks = kPre ? 2 : 4;

  FusedDownsample<R, TF> f;

  MRMF_HD void operator()(int64_t i) const {
    const FusedGeom& g = f.g;
    int64_t q = g.chunk_div(i);
    const int64_t j2 = i - q * g.nchunk;  // which group of kV outputs along the last axis
    const int64_t q1 = g.nblk1_div(q);
    const int64_t o1 = q - q1 * g.ngrp1;
    const int64_t n = g.nblk0_div(q1);
    const int64_t o0 = q1 - n * g.nblk[0];
    const int64_t f0 = g.f[0][0], f1 = g.f[0][1];
    // s[2] == C: the segment of outputs [j2 kV, j2 kV + kV) starts kP elements per group in.
    const T* const x0 = f.x + n * g.s_n + o0 * f0 * g.s[0] + o1 * f1 * g.s[1] + j2 * kP;
    float t[kP] = {};  // every element is set by the block's first row (f0, f1 >= 1)
    if constexpr (kPre) {
      // Rows in (a, b) order, the order they are summed; the unrolled loops
      // keep seg[] in registers. (a, b) is stepped along rather than
      // computed as r / f1, r % f1: integer division is a software routine
      // on the GPU.
      const int rows = static_cast<int>(f0 * f1);
      RawSegment<T> seg[kFusedVecPreloadRows];
      const T* xr = x0;
      int64_t b = 0;
      MRMF_UNROLL
      for (int r = 0; r < kFusedVecPreloadRows; ++r)
        if (r < rows) {
          seg[r].load(xr);
          xr += g.s[1];
          if (++b == f1) {
            b = 0;
            xr += g.s[0] - f1 * g.s[1];
          }
        }
      MRMF_UNROLL
      for (int r = 0; r < kFusedVecPreloadRows; ++r)
        if (r < rows) add_row(seg[r], t, r == 0);
    } else {
      MRMF_NO_UNROLL
      for (int64_t a = 0; a < f0; ++a) {
        MRMF_NO_UNROLL
        for (int64_t b = 0; b < f1; ++b) {
          RawSegment<T> seg;
          seg.load(x0 + a * g.s[0] + b * g.s[1]);
          add_row(seg, t, a == 0 && b == 0);
        }
      }
    }
    const int64_t plane = g.out[0][0] * g.out[0][1] * g.out[0][2];
    float* const y = f.o.y[0] + n * kC * plane + (o0 * g.out[0][1] + o1) * g.out[0][2] + j2 * kV;
    const float inv = g.inv[0];
    MRMF_UNROLL
    for (int c = 0; c < kC; ++c) {
      float out[kV];
      MRMF_UNROLL
      for (int w = 0; w < kV; ++w) {
        float s = fold_start<kProd>();
        MRMF_UNROLL
        for (int z = 0; z < kF2; ++z) s = fold_step<kProd>(s, t[(w * kF2 + z) * kC + c]);
        if constexpr (kProd) s = f.log_of_product(s, f0 * f1 * kF2);
        out[w] = s * inv;
      }
      store_floats<kV>(y + c * plane, out);
    }
  }

  // A row's values into the running sums, or its factors into the running
  // products (the first row sets them).
  MRMF_HD MRMF_INLINE void add_row(const RawSegment<T>& seg, float* t, bool first) const {
    MRMF_UNROLL
    for (int k = 0; k < kP; ++k) {
      const float v = seg.template input<kProd>(f, k);
      t[k] = first ? v : fold_step<kProd>(t[k], v);
    }
  }
};

// Whether the vector kernel can preload a block's rows for this geometry
// (FusedGeom::vector_preload asks for it): a 2-byte type, blocks of 2 to
// kFusedVecPreloadRows rows (one row loads the same either way, at the
// lower occupancy), and the vector kernel applies at all.
inline bool fused_vector_preloadable(RawType r, const FusedGeom& g) {
  const int64_t rows = g.f[0][0] * g.f[0][1];
  return r != RawType::F32 && fused_vector_f2(g) != 0 && rows >= 2 && rows <= kFusedVecPreloadRows;
}

// Calls fn(kernel) with the vector kernel for f.g's last-axis factor, one of
// the 1, 2 or 4 that fused_vector_f2() admits, preloading where
// f.g.vector_preload asks and the geometry allows (host side: the dispatch
// and the CPU test of the kernel's math choose it the same way).
template <bool kProd, RawType R, FusedTransform TF, class Fn>
void with_vector_kernel_as(const FusedDownsample<R, TF>& f, Fn&& fn) {
  if constexpr (sizeof(typename RawLoad<R>::T) == 2) {
    if (f.g.vector_preload && fused_vector_preloadable(R, f.g)) {
      switch (f.g.f[0][2]) {
        case 1: fn(FusedDownsampleVec<R, TF, 1, true, kProd>{f}); return;
        case 2: fn(FusedDownsampleVec<R, TF, 2, true, kProd>{f}); return;
        case 4: fn(FusedDownsampleVec<R, TF, 4, true, kProd>{f}); return;
        default: break;
      }
    }
  }
  switch (f.g.f[0][2]) {
    case 1: fn(FusedDownsampleVec<R, TF, 1, false, kProd>{f}); return;
    case 2: fn(FusedDownsampleVec<R, TF, 2, false, kProd>{f}); return;
    case 4: fn(FusedDownsampleVec<R, TF, 4, false, kProd>{f}); return;
    default: break;
  }
}
template <RawType R, FusedTransform TF, class Fn>
void with_vector_kernel(const FusedDownsample<R, TF>& f, Fn&& fn) {
  if constexpr (FusedDownsample<R, TF>::kProducts) {
    if (f.by_product(f.g.f[0][0] * f.g.f[0][1] * f.g.f[0][2])) {
      with_vector_kernel_as<true>(f, fn);
      return;
    }
  }
  with_vector_kernel_as<false>(f, fn);
}

}  // namespace mrmf::kernels
