// log1p for float32 written once for both backends: CosmoFlow's input
// transform (data.transform: log1p), one call per element of every cube.
//
// Why not libm's log1pf: glibc's is a scalar call with branches (~9 ns per
// element on the 2-core VM: the fused downsample kernel with log1p ran at
// 2-5 % of memcpy bandwidth, and reducing a 128^3 cube on the host took
// ~110 ms per core on the H200 machine's CPU -- 80 s of a 106 s coarse stage
// in the first CosmoFlow 128^3 GPU experiment). This one is straight-line
// arithmetic and integer bit operations, so g++ vectorizes the CPU rows
// around it; and CUDA's log1pf is another implementation, so the GPU
// kernels gave the CPU's bits only within log1pf's ulps. Here every
// operation is a correctly rounded IEEE operation that neither compiler may
// contract or reorder (the device side spells them as __f*_rn intrinsics;
// the CPU build uses no -ffast-math and no FMA contraction), so the GPU gets
// the CPU's bits.
//
// The method is fdlibm's log1pf (as in FreeBSD and musl): u = 1 + x rounded,
// written u = 2^k * m with m in [sqrt(2)/2, sqrt(2)); log(m) from
// s = f / (2 + f), f = m - 1, with a degree-4 polynomial in s^2; plus
// k * ln 2 in two parts, plus the first-order correction c = (x - (u - 1)) / u
// for the rounding of 1 + x. fdlibm branches around the correction where
// 1 + x needs no reduction (|x| small); here it is always applied -- for those
// x it is exact to first order and the result stays within ~1 ulp (tested
// against double-precision log1p over every uint16 count and random floats,
// tests/unit/test_log1p.cpp). Edge cases by selects: -1 -> -inf, below -1
// or NaN -> NaN, +inf -> +inf.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace mrmf::kernels {
namespace log1p_detail {

// IEEE single operations, round to nearest, never fused on either side.
#if defined(__CUDA_ARCH__)
MRMF_HD MRMF_INLINE float add(float a, float b) { return __fadd_rn(a, b); }
MRMF_HD MRMF_INLINE float sub(float a, float b) { return __fsub_rn(a, b); }
MRMF_HD MRMF_INLINE float mul(float a, float b) { return __fmul_rn(a, b); }
MRMF_HD MRMF_INLINE float div(float a, float b) { return __fdiv_rn(a, b); }
MRMF_HD MRMF_INLINE uint32_t bits(float f) { return __float_as_uint(f); }
MRMF_HD MRMF_INLINE float from_bits(uint32_t u) { return __uint_as_float(u); }
#else
MRMF_HD MRMF_INLINE float add(float a, float b) { return a + b; }
MRMF_HD MRMF_INLINE float sub(float a, float b) { return a - b; }
MRMF_HD MRMF_INLINE float mul(float a, float b) { return a * b; }
MRMF_HD MRMF_INLINE float div(float a, float b) { return a / b; }
MRMF_HD MRMF_INLINE uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
MRMF_HD MRMF_INLINE float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
#endif

// All ones where `b`, else 0.
MRMF_HD MRMF_INLINE uint32_t mask(bool b) { return 0u - static_cast<uint32_t>(b); }

// a where `take_a`, else b, through integer masks rather than `?:`: with a
// float select, g++ sinks the arithmetic that only one side uses into a
// branch, and since float operations may trap (-ftrapping-math, its
// default) it cannot turn that branch back into a select.
MRMF_HD MRMF_INLINE float pick(bool take_a, float a, float b) {
  const uint32_t m = mask(take_a);
  return from_bits((bits(a) & m) | (bits(b) & ~m));
}

// u = 2^k * m with m in [sqrt(2)/2, sqrt(2)) for a positive normal u:
// returns k and sets f = m - 1. Shifting u's bits by 1 - sqrt(2)/2's worth
// of mantissa makes the exponent field k's.
MRMF_HD MRMF_INLINE int reduce(float u, float& f) {
  const uint32_t iu = bits(u) + (0x3f800000u - 0x3f3504f3u);
  f = sub(from_bits((iu & 0x007fffffu) + 0x3f3504f3u), 1.f);
  return static_cast<int>(iu >> 23) - 0x7f;
}

// log(2^k * (1 + f)) + c for f from reduce(), by fdlibm's method: log(1 + f)
// from s = f / (2 + f) with a degree-4 polynomial in s^2, plus k * ln 2 in
// two parts, summed left to right as
// s * (hfsq + R) + (k ln2_lo + c) - hfsq + f + k ln2_hi.
MRMF_HD MRMF_INLINE float log_reduced(float f, int k, float c) {
  // fdlibm's constants: ln 2 split into a 17-bit ln2_hi and the rest, so
  // that k * ln2_hi is exact for |k| < 185 (log1p_f32's k is at most 128;
  // log_pow2_f32's may reach 255, where that product rounds once more --
  // still within 1 ulp, tests/unit/test_log1p.cpp).
  constexpr float kLn2Hi = 6.9313812256e-01f;  // 0x3f317180
  constexpr float kLn2Lo = 9.0580006145e-06f;  // 0x3717f7d1
  constexpr float kLg1 = 0.66666662693f;       // 0xaaaaaa.0p-24
  constexpr float kLg2 = 0.40000972152f;       // 0xccce13.0p-25
  constexpr float kLg3 = 0.28498786688f;       // 0x91e9ee.0p-25
  constexpr float kLg4 = 0.24279078841f;       // 0xf89e26.0p-26
  const float s = div(f, add(2.f, f));
  const float z = mul(s, s), w = mul(z, z);
  const float t1 = mul(w, add(kLg2, mul(w, kLg4)));
  const float t2 = mul(z, add(kLg1, mul(w, kLg3)));
  const float r = add(t2, t1);
  const float hfsq = mul(mul(0.5f, f), f);
  const float dk = static_cast<float>(k);
  return add(add(sub(add(mul(s, add(hfsq, r)), add(mul(dk, kLn2Lo), c)), hfsq), f), mul(dk, kLn2Hi));
}

}  // namespace log1p_detail

MRMF_HD MRMF_INLINE float log1p_f32(float x) {
  using namespace log1p_detail;
  const float u = add(1.f, x);
  float f;
  const int k = reduce(u, f);
  // The rounding of 1 + x, divided by u; for k >= 2, u - x is exact. Both
  // forms computed, one picked by a bit mask (pick()).
  const float c_big = sub(1.f, sub(u, x)), c_small = sub(x, sub(u, 1.f));
  const float c = div(pick(k >= 2, c_big, c_small), u);
  const float y = log_reduced(f, k, c);
  // The edge cases from x's bits (a float comparison such as x >= -1 may
  // trap on NaN), with integer masks and bitwise ors throughout: g++ turns
  // `||` and nested `?:` here back into branches, and the loop stays scalar.
  // Above 0xbf800000 (-1) are the negatives below -1 and negative NaNs.
  const uint32_t bx = bits(x);
  const uint32_t inf = mask(bx == 0x7f800000u), minus_one = mask(bx == 0xbf800000u);
  const uint32_t nan_or_below = mask((bx & 0x7fffffffu) > 0x7f800000u) | mask(bx > 0xbf800000u);
  const uint32_t edge = (0x7fc00000u & ~(inf | minus_one)) | (0x7f800000u & inf) | (0xff800000u & minus_one);
  const uint32_t special = inf | minus_one | nan_or_below;
  return from_bits((edge & special) | (bits(y) & ~special));
}

// log(p * 2^e2) for p = 0 (-inf), a positive normal p, or +inf (+inf);
// NaN for NaN and negative p. The same operations as log1p_f32 without the
// rounding correction (p is exact), and e2 enters the exponent exactly
// (k + e2 within +-255: tested to 1 ulp there). Why: the fused
// downsample's log1p of a block of integer counts is the logarithm of the
// product of (1 + x), one per block (kernels/log1p_products.h), with the
// factors scaled by 2^-8 so that the product stays in range and e2
// restoring the scale.
MRMF_HD MRMF_INLINE float log_pow2_normal_f32(float p, int e2);
MRMF_HD MRMF_INLINE float log_pow2_f32(float p, int e2) {
  using namespace log1p_detail;
  const float y = log_pow2_normal_f32(p, e2);
  const uint32_t bp = bits(p);
  const uint32_t inf = mask(bp == 0x7f800000u), zero = mask((bp & 0x7fffffffu) == 0u);
  const uint32_t nan_or_negative = mask((bp & 0x7fffffffu) > 0x7f800000u) | mask(bp > 0x80000000u);
  const uint32_t edge = (0x7fc00000u & nan_or_negative) | (0x7f800000u & inf) | (0xff800000u & zero);
  const uint32_t special = inf | zero | nan_or_negative;
  return from_bits((edge & special) | (bits(y) & ~special));
}

// log_pow2_f32 where p is known to be a positive normal float (the same
// bits there), without the edge cases' selects: a product of uint16 count
// factors.
MRMF_HD MRMF_INLINE float log_pow2_normal_f32(float p, int e2) {
  using namespace log1p_detail;
  float f;
  const int k = reduce(p, f) + e2;
  return log_reduced(f, k, 0.f);
}

}  // namespace mrmf::kernels
