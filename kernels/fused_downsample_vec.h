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
// calls() counts the groups of kV outputs.
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
  template <RawType R, FusedTransform TF>
  MRMF_HD MRMF_INLINE float value(const FusedDownsample<R, TF>& f, int k) const {
    const int e = k * static_cast<int>(sizeof(T));  // byte offset in the segment
    const uint32_t bits = r[e / 16].w[(e % 16) / 4] >> (8 * (e % 4));  // little-endian: element k's bytes
    return f.value_of_bits(bits, k % kFusedVecChannels);
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

template <RawType R, FusedTransform TF, int kF2>
struct FusedDownsampleVec {
  using T = typename RawLoad<R>::T;
  static constexpr int kC = static_cast<int>(kFusedVecChannels);
  static constexpr int kV = static_cast<int>(fused_vector_width(kF2));
  static constexpr int kP = kV * kF2 * kC;                       // elements per row segment
  static_assert(kV >= 1 && kP == kFusedVecElems, "a segment is kFusedVecElems elements");

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
    MRMF_NO_UNROLL
    for (int64_t a = 0; a < f0; ++a) {
      MRMF_NO_UNROLL
      for (int64_t b = 0; b < f1; ++b) {
        RawSegment<T> seg;
        seg.load(x0 + a * g.s[0] + b * g.s[1]);
        const bool first = a == 0 && b == 0;
        MRMF_UNROLL
        for (int k = 0; k < kP; ++k) {
          const float v = seg.value(f, k);
          t[k] = first ? v : t[k] + v;
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
        float s = 0.f;
        MRMF_UNROLL
        for (int z = 0; z < kF2; ++z) s += t[(w * kF2 + z) * kC + c];
        out[w] = s * inv;
      }
      store_floats<kV>(y + c * plane, out);
    }
  }
};

// Calls fn(kernel) with the vector kernel for f.g's last-axis factor, one of
// the 1, 2 or 4 that fused_vector_f2() admits (host side: the dispatch and
// the CPU test of the kernel's math choose it the same way).
template <RawType R, FusedTransform TF, class Fn>
void with_vector_kernel(const FusedDownsample<R, TF>& f, Fn&& fn) {
  switch (f.g.f[0][2]) {
    case 1: fn(FusedDownsampleVec<R, TF, 1>{f}); return;
    case 2: fn(FusedDownsampleVec<R, TF, 2>{f}); return;
    case 4: fn(FusedDownsampleVec<R, TF, 4>{f}); return;
    default: break;
  }
}

}  // namespace mrmf::kernels
