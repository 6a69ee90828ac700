// The fused downsample's multi-level kernel for channels-last C = 4 data
// (CosmoFlow): several resolution levels of a cube in one pass over the
// input, with the vector kernel's whole-segment loads.
//
// Why: the general traversal (FusedDownsample::operator(), one coarsest-block
// position per thread) keeps every level's loop nest and block sums in one
// thread with element-by-element loads; on an H100 it moved 23-27 % of a
// device copy's bandwidth for 1/1 + 1/8 + 1/64 and for the 1/2 + 1/8 ladder
// (session 20), where the single-level vector kernel moves 85-97 %.
//
// What a call owns: one coarsest block along axes 0 and 1 (B0 x B1 input
// rows) and one segment of kFusedChainVoxels = 4 input positions along the
// last axis (16 elements: 16-byte loads, as in fused_downsample_vec.h). It
// writes every level's outputs inside that region, so the input is read and
// converted once for all levels.
//
// Which requests: a CHAIN of levels -- in computation order (g.order) the
// first is read from the input and each later one is derived from the one
// before it (g.src), e.g. 1/1 -> 1/8 -> 1/64, or 1/2 along one axis -> 1/8.
// Then every level's blocks nest in the next one's, and the rows can be
// visited in hierarchical order: level k's blocks, each in (a, b) row-major
// order of its own rows, grouped by level k+1's blocks, ... So each level
// completes its blocks one at a time and keeps ONE running-sum accumulator
// in registers, fed by the rows of the level below it as they complete.
// The row order inside every level's block is row-major, so the additions
// are the header's summation rule and derived_outputs()'s, in the same
// order: per input (or source-level) position a running sum over the
// block's rows from the first, then per output the sum from 0 along the last
// axis, scaled. The bits equal the CPU rows (tested on the CPU by running
// this functor, tests/unit/test_fused_downsample.cpp).
//
// Preconditions (fused_chain_levels() and the dispatch check them): 2 to
// kFusedMaxLevels levels forming a chain, channels-last with C == 4,
// the last axis a multiple of 4 and its coarsest factor 1, 2 or 4; the input
// 16-byte aligned, level l's output aligned to 4 * (4 / f[l][2]) bytes;
// g.chunk == 4 / block[2], g.group1 == 1, finalize()d (calls() then counts
// the calls).
#pragma once

#include "kernels/fused_downsample_vec.h"

namespace mrmf::kernels {

// Input positions along the last axis per call (one 16-element segment).
constexpr int64_t kFusedChainVoxels = kFusedVecElems / kFusedVecChannels;

// The number of levels if `g` is a chain the kernel runs, else 0. Pointer
// alignment is the caller's to check.
inline int fused_chain_levels(const FusedGeom& g) {
  if (g.levels < 2 || g.s_c != 1 || g.c != kFusedVecChannels || g.s[2] != g.c) return 0;
  if (g.in[2] % kFusedChainVoxels != 0 || kFusedChainVoxels % g.block[2] != 0) return 0;
  if (g.src[g.order[0]] >= 0) return 0;
  for (int k = 1; k < g.levels; ++k)
    if (g.src[g.order[k]] != g.order[k - 1]) return 0;
  return g.levels;
}

// out[w * C + c] = (0 + sum over z < kZ of a[(w * kZ + z) * C + c]) * inv for
// the first nw outputs w: the per-output sum along the last axis. kProd
// (a level reduced by products, kernels/log1p_products.h): the product
// from 1 instead, and its logarithm for a block of `cells` elements.
template <int kZ, bool kProd = false, bool kSigned = false>
MRMF_HD MRMF_INLINE void chain_zsum(const float* a, int nw, float inv, float* out, int64_t cells = 0) {
  constexpr int kC = static_cast<int>(kFusedVecChannels);
  MRMF_UNROLL
  for (int w = 0; w < static_cast<int>(kFusedChainVoxels) / kZ; ++w)
    if (w < nw) {
      MRMF_UNROLL
      for (int c = 0; c < kC; ++c) {
        float s = fold_start<kProd>();
        MRMF_UNROLL
        for (int z = 0; z < kZ; ++z) s = fold_step<kProd>(s, a[(w * kZ + z) * kC + c]);
        if constexpr (kProd) s = log_of_count_product<kSigned>(s, cells);
#if defined(__CUDA_ARCH__)
        // Rounded here: the next level adds it to a running sum, and nvcc
        // would contract s * inv + sum into one FMA (one rounding, not the
        // CPU's two) where 1/|block| is no power of two.
        out[w * kC + c] = __fmul_rn(s, inv);
#else
        out[w * kC + c] = s * inv;
#endif
      }
    }
}

// Channel c's nw (= kN) consecutive outputs from out[w * C + c].
template <int kN>
MRMF_HD MRMF_INLINE void chain_store(float* y, int64_t plane, const float* out) {
  constexpr int kC = static_cast<int>(kFusedVecChannels);
  MRMF_UNROLL
  for (int c = 0; c < kC; ++c) {
    float v[kN];
    MRMF_UNROLL
    for (int w = 0; w < kN; ++w) v[w] = out[w * kC + c];
    store_floats<kN>(y + c * plane, v);
  }
}

// Input rows a call may preload (kPre below): a block of at most this many
// rows of a 2-byte type, whose loads all go out before the first addition.
constexpr int kFusedChainPreloadRows = 4;

// kPre: false keeps two rows in flight (the next row's loads issued before
// this row's additions); true issues every row's loads up front, for blocks
// of at most kFusedChainPreloadRows rows (the dispatch checks). Why the
// second: the 1/2 + 1/8 CosmoFlow ladder's blocks have 4 input rows, about
// one block per thread at this kernel's grid, so a thread with two rows in
// flight waits two load latencies for its 128 bytes; at 2 resident blocks
// per SM that is ~32 KB of reads in flight per SM, where the single-level
// vector kernel (all rows at once, 4 blocks per SM) reaches 91-93 % of a
// device copy and the ladder 74-78 % (H200, session 25). Measured since
// (H200, 2026-11-27, bench/results/gpu_2026-11-27d.md): the ladder at 90 %
// preloaded against 76 % with two rows in flight, 86 against 100 us in
// Nsight Compute (DRAM throughput 67 against 58 % of peak, the same 25 %
// occupancy): the default since. Same sums in the same order either way:
// only the loads move.
//
// kProd: the first level (read from the input) is reduced by products
// (FusedDownsample::by_product(); kernels/log1p_products.h): its running
// sums are running products of count factors, each of its outputs one
// logarithm; the derived levels average outputs as before.
template <RawType R, FusedTransform TF, int kL, bool kPre = false, bool kProd = false>
struct FusedDownsampleChain {
  using T = typename RawLoad<R>::T;
  static constexpr int kC = static_cast<int>(kFusedVecChannels);
  static constexpr int kP = static_cast<int>(kFusedVecElems);  // elements per row segment
  static_assert(kL >= 2 && kL <= kFusedMaxLevels, "a chain has 2 to kFusedMaxLevels levels");
  static_assert(!kPre || sizeof(T) == 2, "preloading is for 2-byte stored types");
  static_assert(!kProd || FusedDownsample<R, TF>::kProducts, "products are for log1p of 16-bit integers");
  // Resident 256-thread blocks per SM the launch asks for. ptxas -v, sm_90,
  // unbounded: 118-126 registers at two levels (164-167 with log1p), 146-156
  // at three (182-186), 168-228 at four. Bounded to 128 (two blocks): two
  // and three levels use 116-128 without spilling, except 16-28 bytes for
  // log1p or float32 at three levels (float32 + log1p at two); four levels
  // spilled 144-272 bytes there, so they run one block per SM (166-204
  // registers, no spills).
  static constexpr int kMinBlocks = kL <= 3 ? 2 : 1;

  FusedDownsample<R, TF> f;

  MRMF_HD void operator()(int64_t i) const {
    const FusedGeom& g = f.g;
    int64_t q = g.chunk_div(i);
    const int64_t j2 = i - q * g.nchunk;  // which segment of 4 input positions along the last axis
    const int64_t q1 = g.nblk1_div(q);
    const int64_t p1 = q - q1 * g.ngrp1;
    const int64_t n = g.nblk0_div(q1);
    const int64_t p0 = q1 - n * g.nblk[0];
    // Chain position k = level g.order[k]. Its block holds rad0[k] x rad1[k]
    // rows of level k-1's outputs (of input rows for k = 0); d0[k], d1[k]
    // are the current row's digits in that grid (the hierarchical order is
    // an odometer over them, level 0's b digit fastest).
    int rad0[kL], rad1[kL], d0[kL], d1[kL];
    MRMF_UNROLL
    for (int k = 0; k < kL; ++k) {
      const int l = g.order[k];
      rad0[k] = static_cast<int>(k == 0 ? g.f[l][0] : g.r[l][0]);
      rad1[k] = static_cast<int>(k == 0 ? g.f[l][1] : g.r[l][1]);
      d0[k] = d1[k] = 0;
    }
    const T* const x0 = f.x + n * g.s_n + p0 * g.block[0] * g.s[0] + p1 * g.block[1] * g.s[1] + j2 * kP;
    const int rows = static_cast<int>(g.block[0] * g.block[1]);
    // Level k's running sums per input / source position (k >= 1: the first
    // kP / f2 used); every element is set by its block's first row.
    float acc[kL][kP] = {};
    if constexpr (kPre) {
      // Every row's loads first (rows <= kFusedChainPreloadRows), in the
      // order the rows are summed; the unrolled loops keep seg[] in registers.
      RawSegment<T> seg[kFusedChainPreloadRows];
      int e0[kL] = {}, e1[kL] = {};  // the loads' digits, running ahead of d0, d1
      MRMF_UNROLL
      for (int t = 0; t < kFusedChainPreloadRows; ++t)
        if (t < rows) {
          int64_t a = 0, b = 0;
          row_of(e0, e1, rad0, rad1, -1, a, b);
          seg[t].load(x0 + a * g.s[0] + b * g.s[1]);
          advance(e0, e1, rad0, rad1);
        }
      MRMF_UNROLL
      for (int t = 0; t < kFusedChainPreloadRows; ++t)
        if (t < rows) {
          add_row(seg[t], acc, d0, d1, rad0, rad1, n, p0, p1, j2);
          advance(d0, d1, rad0, rad1);
        }
    } else {
      // The next row's loads are issued before this row's additions: two
      // rows in flight per thread, at the occupancy this kernel's registers allow.
      RawSegment<T> cur;
      cur.load(x0);
      MRMF_NO_UNROLL
      for (int t = 0; t < rows; ++t) {
        int e0[kL], e1[kL];  // the next row's digits
        MRMF_UNROLL
        for (int k = 0; k < kL; ++k) {
          e0[k] = d0[k];
          e1[k] = d1[k];
        }
        advance(e0, e1, rad0, rad1);
        RawSegment<T> nxt = cur;
        if (t + 1 < rows) {
          int64_t a = 0, b = 0;
          row_of(e0, e1, rad0, rad1, -1, a, b);
          nxt.load(x0 + a * g.s[0] + b * g.s[1]);
        }
        add_row(cur, acc, d0, d1, rad0, rad1, n, p0, p1, j2);
        MRMF_UNROLL
        for (int k = 0; k < kL; ++k) {
          d0[k] = e0[k];
          d1[k] = e1[k];
        }
        cur = nxt;
      }
    }
  }

 private:
  // One input row (at digits d0, d1) into level 0's running sums; then each
  // level whose block this row completes: its outputs, added into the next
  // level's running sums.
  MRMF_HD MRMF_INLINE void add_row(const RawSegment<T>& cur, float (&acc)[kL][kP], const int* d0, const int* d1,
                                   const int* rad0, const int* rad1, int64_t n, int64_t p0, int64_t p1,
                                   int64_t j2) const {
    const bool first = d0[0] == 0 && d1[0] == 0;
    MRMF_UNROLL
    for (int k = 0; k < kP; ++k) {
      const float v = cur.template input<kProd>(f, k);
      acc[0][k] = first ? v : fold_step<kProd>(acc[0][k], v);
    }
    bool done = d0[0] == rad0[0] - 1 && d1[0] == rad1[0] - 1;
    MRMF_UNROLL
    for (int k = 0; k < kL; ++k)
      if (done) {
        float out[kP] = {};  // emit() sets the first nw * C
        const int nw = emit(k, n, p0, p1, j2, acc[k], d0, d1, rad0, rad1, out);
        if (k + 1 < kL) {
          const bool first_up = d0[k + 1] == 0 && d1[k + 1] == 0;
          MRMF_UNROLL
          for (int e = 0; e < kP; ++e)
            if (e < nw * kC) acc[k + 1][e] = first_up ? out[e] : acc[k + 1][e] + out[e];
          done = d0[k + 1] == rad0[k + 1] - 1 && d1[k + 1] == rad1[k + 1] - 1;
        }
      }
  }

  // The odometer: level 0's b digit fastest, carries upward.
  MRMF_HD MRMF_INLINE static void advance(int* e0, int* e1, const int* rad0, const int* rad1) {
    bool carry = true;
    MRMF_UNROLL
    for (int k = 0; k < kL; ++k)
      if (carry) {
        carry = false;
        if (++e1[k] == rad1[k]) {
          e1[k] = 0;
          if (++e0[k] == rad0[k]) {
            e0[k] = 0;
            carry = true;
          }
        }
      }
  }

  // The row (a, b) of level k's current block inside the coarsest block, in
  // level k's output rows (k = -1: input rows): sum over the levels above k
  // of their digit times the size of one of their sub-blocks.
  MRMF_HD MRMF_INLINE static void row_of(const int* d0, const int* d1, const int* rad0, const int* rad1, int k,
                                         int64_t& a, int64_t& b) {
    int64_t m0 = 1, m1 = 1;
    a = b = 0;
    MRMF_UNROLL
    for (int j = 0; j < kL; ++j)
      if (j > k) {
        a += d0[j] * m0;
        b += d1[j] * m1;
        m0 *= rad0[j];
        m1 *= rad1[j];
      }
  }

  // chain_zsum() for z last-axis positions per output (1, 2 or 4).
  template <bool kP>
  MRMF_HD MRMF_INLINE static void zsums(int z, const float* acc, int nw, float inv, float* out, int64_t cells) {
    switch (z) {
      case 1: chain_zsum<1, kP, R == RawType::I16>(acc, nw, inv, out, cells); break;
      case 2: chain_zsum<2, kP, R == RawType::I16>(acc, nw, inv, out, cells); break;
      default: chain_zsum<4, kP, R == RawType::I16>(acc, nw, inv, out, cells); break;
    }
  }

  // Chain position k's outputs for its completed block from its running
  // sums `acc`, written to level g.order[k] and left in out[w * C + c] for
  // the next level. Returns nw, the outputs per channel along the last axis.
  MRMF_HD MRMF_INLINE int emit(int k, int64_t n, int64_t p0, int64_t p1, int64_t j2, const float* acc, const int* d0,
                               const int* d1, const int* rad0, const int* rad1, float* out) const {
    const FusedGeom& g = f.g;
    const int l = g.order[k];
    const int z = static_cast<int>(k == 0 ? g.f[l][2] : g.r[l][2]);  // last-axis positions per output
    const int nw = static_cast<int>(kFusedChainVoxels / g.f[l][2]);
    const float inv = k == 0 ? g.inv[l] : g.inv_r[l];
    if (kProd && k == 0)  // the first level's blocks take products; the derived levels sum
      zsums<kProd>(z, acc, nw, inv, out, g.f[l][0] * g.f[l][1] * g.f[l][2]);
    else
      zsums<false>(z, acc, nw, inv, out, 0);
    int64_t u0 = 0, u1 = 0;
    row_of(d0, d1, rad0, rad1, k, u0, u1);
    const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2], plane = O0 * O1 * O2;
    const int64_t o0 = p0 * g.per[l][0] + u0, o1 = p1 * g.per[l][1] + u1;
    float* const y = f.o.y[l] + n * kC * plane + (o0 * O1 + o1) * O2 + j2 * nw;
    switch (nw) {
      case 4: chain_store<4>(y, plane, out); break;
      case 2: chain_store<2>(y, plane, out); break;
      default: chain_store<1>(y, plane, out); break;
    }
    return nw;
  }
};

// Whether the chain kernel can preload a block's rows for this geometry
// (FusedGeom::chain_preload asks for it): two levels only -- ptxas -v,
// sm_90: two levels preloading take 124 registers without spilling, three
// spilled 48-108 bytes at the 128-register bound and four need 174-186.
inline bool fused_chain_preloadable(RawType r, const FusedGeom& g) {
  return r != RawType::F32 && g.levels == 2 && g.block[0] * g.block[1] <= kFusedChainPreloadRows;
}

// Calls fn(kernel) with the chain kernel for f.g's level count, preloading
// where f.g.chain_preload asks and the geometry allows (host side: the GPU
// dispatch and the CPU test of the kernel's math).
template <bool kProd, RawType R, FusedTransform TF, class Fn>
void with_chain_kernel_as(const FusedDownsample<R, TF>& f, Fn&& fn) {
  if constexpr (sizeof(typename RawLoad<R>::T) == 2) {
    if (f.g.chain_preload && fused_chain_preloadable(R, f.g)) {
      fn(FusedDownsampleChain<R, TF, 2, true, kProd>{f});
      return;
    }
  }
  switch (f.g.levels) {
    case 2: fn(FusedDownsampleChain<R, TF, 2, false, kProd>{f}); return;
    case 3: fn(FusedDownsampleChain<R, TF, 3, false, kProd>{f}); return;
    case 4: fn(FusedDownsampleChain<R, TF, 4, false, kProd>{f}); return;
    default: break;
  }
}
template <RawType R, FusedTransform TF, class Fn>
void with_chain_kernel(const FusedDownsample<R, TF>& f, Fn&& fn) {
  if constexpr (FusedDownsample<R, TF>::kProducts) {
    const int l = f.g.order[0];  // the level read from the input
    if (f.by_product(f.g.f[l][0] * f.g.f[l][1] * f.g.f[l][2])) {
      with_chain_kernel_as<true>(f, fn);
      return;
    }
  }
  with_chain_kernel_as<false>(f, fn);
}

}  // namespace mrmf::kernels
