// The fused downsample's product rule (kernels/log1p_products.h) on a
// vector of float lanes: count_factor, log_pow2_normal_f32 and log_pow2_f32
// (kernels/log1p.h) for the hand-written AVX-512 and AVX2 rows
// (kernels/rows_avx512.cpp, rows_avx2.cpp), with the scalar functions'
// operations in the same order, so that every lane has their bits, which
// the GPU kernels' products compute too (tests/unit/test_log1p_lanes.cpp
// compares them lane by lane; the GPU's products have not run yet).
//
// Why: the CPU rows of a block reduced by products ended in three passes
// over the accumulator -- the last row's factors, a logarithm per output,
// the deinterleave to channels-first -- and on an Emerald Rapids VM 2x2x1
// with log1p on counts ran at 46-62 % of memcpy where summing the same
// block from the table ran at 72-92 %; in one pass per register, 55-79 %
// (bench/results/cpu_data_2026-11-30f.txt).
//
// Written once with GCC vector extensions on the intrinsics' own types
// (__m512 and __m256 are vectors of floats), so one template serves both
// widths. It must be inlined (always_inline) into the target("avx512f") or
// target("avx2") function that calls it, which decides the instructions;
// compiled alone (the test), GCC splits the lanes into SSE2 registers with
// the same per-lane IEEE operations. Host only; no contraction
// (-ffp-contract=off, as for log1p.h). Files that include it build with
// -Wno-psabi: GCC warns at every instantiation that a 64-byte vector passed
// by value has another ABI where AVX-512 is off; every function here that
// takes or returns lanes (and the folds of kernels/rows_quads.h) is
// always_inline, so no such call is made, optimized or not (CMakeLists.txt).
#pragma once

#include <cstdint>

#include "kernels/log1p_products.h"

#if defined(__GNUC__)
#define MRMF_LANES_INLINE [[gnu::always_inline]] inline
#else
#define MRMF_LANES_INLINE inline
#endif

#if defined(__GNUC__) && !defined(__CUDACC__)
#define MRMF_HAVE_LANES 1

namespace mrmf::kernels::lanes {

// The float lanes of __m256 and __m512 without their may_alias attribute,
// which a template argument drops (with a warning); the same vectors
// otherwise, converted implicitly.
typedef float F32x8 __attribute__((vector_size(32)));
typedef float F32x16 __attribute__((vector_size(64)));

// int32 and uint32 lanes of the same width as a float vector F.
template <int kBytes>
struct Ints;
template <>
struct Ints<32> {
  typedef int32_t I __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
};
template <>
struct Ints<64> {
  typedef int32_t I __attribute__((vector_size(64)));
  typedef uint32_t U __attribute__((vector_size(64)));
};
template <class F>
using I32 = typename Ints<sizeof(F)>::I;
template <class F>
using U32 = typename Ints<sizeof(F)>::U;

// log_reduced(f, k, 0) of kernels/log1p.h, lane by lane: the same
// operations in the same order (c = 0 still added: -0 + 0 is +0).
template <class F>
MRMF_LANES_INLINE F log_reduced_lanes(F f, I32<F> k) {
  constexpr float kLn2Hi = 6.9313812256e-01f, kLn2Lo = 9.0580006145e-06f;
  constexpr float kLg1 = 0.66666662693f, kLg2 = 0.40000972152f, kLg3 = 0.28498786688f, kLg4 = 0.24279078841f;
  const F s = f / (2.f + f);
  const F z = s * s, w = z * z;
  const F t1 = w * (kLg2 + w * kLg4);
  const F t2 = z * (kLg1 + w * kLg3);
  const F r = t2 + t1;
  const F hfsq = (0.5f * f) * f;
  const F dk = __builtin_convertvector(k, F);
  return ((((s * (hfsq + r)) + (dk * kLn2Lo + 0.f)) - hfsq) + f) + dk * kLn2Hi;
}

// log_pow2_normal_f32 (p a positive normal float in every lane).
template <class F>
MRMF_LANES_INLINE F log_pow2_normal_lanes(F p, int e2) {
  using U = U32<F>;
  const U iu = reinterpret_cast<U>(p) + (0x3f800000u - 0x3f3504f3u);  // reduce() of kernels/log1p.h
  const F f = reinterpret_cast<F>((iu & 0x007fffffu) + 0x3f3504f3u) - 1.f;
  // iu < 2^31 for a positive normal p, so the signed shift is reduce()'s.
  const I32<F> k = (reinterpret_cast<I32<F>>(iu) >> 23) - 0x7f + e2;
  return log_reduced_lanes(f, k);
}

// log_pow2_f32: also 0 (-inf), +inf, NaN and negative p, by the same masks.
template <class F>
MRMF_LANES_INLINE F log_pow2_lanes(F p, int e2) {
  using U = U32<F>;
  const F y = log_pow2_normal_lanes(p, e2);
  const U bp = reinterpret_cast<U>(p);
  const U inf = reinterpret_cast<U>(bp == 0x7f800000u), zero = reinterpret_cast<U>((bp & 0x7fffffffu) == 0u);
  const U nan_or_negative =
      reinterpret_cast<U>((bp & 0x7fffffffu) > 0x7f800000u) | reinterpret_cast<U>(bp > 0x80000000u);
  const U edge = (0x7fc00000u & nan_or_negative) | (0x7f800000u & inf) | (0xff800000u & zero);
  const U special = inf | zero | nan_or_negative;
  return reinterpret_cast<F>((edge & special) | (reinterpret_cast<U>(y) & ~special));
}

// count_factor<kSigned> of 16-bit values already widened to int32 lanes
// (zero-extended for uint16, sign-extended for int16): (1 + x) * 2^-8, and
// NaN for an int16 below -1.
template <bool kSigned, class F>
MRMF_LANES_INLINE F count_factor_lanes(I32<F> x) {
  using U = U32<F>;
  const I32<F> v = x + 1;
  const F u = __builtin_convertvector(v, F) * (1.f / 256.f);
  if constexpr (!kSigned) return u;
  const U keep = reinterpret_cast<U>(v >= 0);
  return reinterpret_cast<F>((reinterpret_cast<U>(u) & keep) | (0x7fc00000u & ~keep));
}

}  // namespace mrmf::kernels::lanes
#endif

namespace mrmf::kernels::lanes {
// log_of_count_product<kSigned> (kernels/log1p_products.h) for a float or,
// where vector extensions exist, for lanes: the block's sum of log1p from
// the product of its `cells` count factors.
template <bool kSigned, class F>
MRMF_LANES_INLINE F log_of_count_product_any(F p, int cells) {
  if constexpr (sizeof(F) == sizeof(float)) {
    return log_of_count_product<kSigned>(p, cells);
  } else {
#if defined(MRMF_HAVE_LANES)
    if constexpr (kSigned)
      return log_pow2_lanes(p, 8 * cells);
    else
      return log_pow2_normal_lanes(p, 8 * cells);
#else
    static_assert(sizeof(F) == sizeof(float), "lanes need GCC's vector extensions");
#endif
  }
}
}  // namespace mrmf::kernels::lanes
