// The product rule on vector lanes (kernels/log1p_lanes.h) against the
// scalar functions it mirrors (kernels/log1p.h, log1p_products.h), bit for
// bit, at both widths the CPU rows use. Compiled here without AVX, so GCC
// splits the lanes into SSE2 registers: the same per-lane IEEE operations
// the AVX-512 and AVX2 rows run (which tests/unit/test_product_rows.cpp
// checks whole, where the CPU has them).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/log1p_lanes.h"

using namespace mrmf::kernels;

namespace {

typedef float F8 __attribute__((vector_size(32)));
typedef float F16 __attribute__((vector_size(64)));

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// fn(lanes) over `in` in groups of the vector's width; the bits of the
// results, one per input.
template <class F, class Fn>
std::vector<uint32_t> on_lanes(const std::vector<float>& in, const Fn& fn) {
  constexpr size_t kN = sizeof(F) / sizeof(float);
  std::vector<uint32_t> out(in.size());
  for (size_t i = 0; i + kN <= in.size(); i += kN) {
    F v;
    std::memcpy(&v, &in[i], sizeof v);
    const F r = fn(v);
    std::memcpy(&out[i], &r, sizeof r);
  }
  return out;
}

// Float bit patterns from `first` in steps of `step` (the count rounded
// down to a multiple of 16 lanes).
std::vector<float> patterns(uint32_t first, uint32_t last, uint32_t step) {
  std::vector<float> v;
  for (uint64_t b = first; b <= last; b += step) v.push_back(float_of(static_cast<uint32_t>(b)));
  v.resize(v.size() / 16 * 16);
  return v;
}

template <class F>
void check_log_pow2(int e2) {
  // Every positive normal float's exponent, many mantissas each.
  const std::vector<float> p = patterns(0x00800000u, 0x7f7fffffu, 4093u);
  const auto normal = on_lanes<F>(p, [&](F v) { return lanes::log_pow2_normal_lanes(v, e2); });
  const auto full = on_lanes<F>(p, [&](F v) { return lanes::log_pow2_lanes(v, e2); });
  int64_t off = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    off += normal[i] != bits_of(log_pow2_normal_f32(p[i], e2));
    off += full[i] != bits_of(log_pow2_f32(p[i], e2));
  }
  INFO("e2 " << e2 << ", " << p.size() << " inputs, " << sizeof(F) / 4 << " lanes");
  CHECK(off == 0);
}

}  // namespace

TEST_CASE("log_pow2 on lanes has the scalar function's bits", "[log1p]") {
  // The product rule's e2 is 8 * cells for blocks of 4 to 15 cells; 0 and
  // the ends of the range besides.
  for (int e2 : {0, 32, 64, 120, -120, 200}) {
    check_log_pow2<F8>(e2);
    check_log_pow2<F16>(e2);
  }
}

TEST_CASE("log_pow2 on lanes: the edge cases of log_pow2_f32, one per lane", "[log1p]") {
  std::vector<float> p = {0.f,
                          -0.f,
                          float_of(0x7f800000u),
                          float_of(0xff800000u),
                          float_of(0x7fc00000u),
                          float_of(0xffc00000u),
                          float_of(0x7f800001u),
                          -1.f,
                          float_of(0x00000001u),
                          float_of(0x007fffffu),
                          float_of(0x80000001u),
                          1.f,
                          float_of(0x00800000u),
                          float_of(0x7f7fffffu),
                          3.5f,
                          -3.5f};
  for (int e2 : {0, 64}) {
    const auto got16 = on_lanes<F16>(p, [&](F16 v) { return lanes::log_pow2_lanes(v, e2); });
    for (size_t i = 0; i < p.size(); ++i) {
      INFO("input bits " << std::hex << bits_of(p[i]) << ", e2 " << std::dec << e2);
      CHECK(got16[i] == bits_of(log_pow2_f32(p[i], e2)));
    }
    // The same inputs in the other lanes of the narrower vector.
    std::rotate(p.begin(), p.begin() + 3, p.end());
    const auto got8 = on_lanes<F8>(p, [&](F8 v) { return lanes::log_pow2_lanes(v, e2); });
    for (size_t i = 0; i < p.size(); ++i) CHECK(got8[i] == bits_of(log_pow2_f32(p[i], e2)));
  }
  // The edges are not just passed through: -inf, NaN, +inf where they apply.
  const auto r = on_lanes<F16>(p, [](F16 v) { return lanes::log_pow2_lanes(v, 0); });
  CHECK(std::count(r.begin(), r.end(), 0xff800000u) == 2);  // +0 and -0
  CHECK(std::count(r.begin(), r.end(), 0x7f800000u) == 1);  // +inf
}

TEST_CASE("count factors on lanes equal count_factor for every 16-bit pattern", "[log1p]") {
  using I16 = lanes::I32<F16>;
  using I8 = lanes::I32<F8>;
  int64_t off = 0, nan = 0;
  for (int32_t b0 = 0; b0 < 65536; b0 += 16) {
    I16 u, s;
    for (int j = 0; j < 16; ++j) {
      u[j] = b0 + j;                                               // zero-extended uint16
      s[j] = static_cast<int16_t>(static_cast<uint16_t>(b0 + j));  // sign-extended int16
    }
    const F16 fu = lanes::count_factor_lanes<false, F16>(u), fs = lanes::count_factor_lanes<true, F16>(s);
    I8 s8;
    for (int j = 0; j < 8; ++j) s8[j] = s[j + 8];
    const F8 fs8 = lanes::count_factor_lanes<true, F8>(s8);
    for (int j = 0; j < 16; ++j) {
      const uint32_t b = static_cast<uint32_t>(b0 + j);
      off += bits_of(fu[j]) != bits_of(count_factor<false>(b));
      off += bits_of(fs[j]) != bits_of(count_factor<true>(b));
      if (j >= 8) off += bits_of(fs8[j - 8]) != bits_of(count_factor<true>(b));
      nan += fs[j] != fs[j];
    }
  }
  CHECK(off == 0);
  CHECK(nan == 32767);  // int16 -32768 .. -2
}

TEST_CASE("log_of_count_product_any takes the scalar rule for a float and the lanes' for vectors", "[log1p]") {
  // A product of three uint16 factors (taken as a block of 8 cells: the
  // scale only), and a zero product (an int16 -1 among the factors).
  const float p = count_factor<false>(7) * count_factor<false>(300) * count_factor<false>(65535);
  F16 v = {};
  v += p;
  F16 z = {};
  CHECK(bits_of(lanes::log_of_count_product_any<false>(p, 8)) == bits_of(log_of_count_product<false>(p, 8)));
  CHECK(bits_of(lanes::log_of_count_product_any<false>(v, 8)[5]) == bits_of(log_of_count_product<false>(p, 8)));
  CHECK(bits_of(lanes::log_of_count_product_any<true>(z, 8)[0]) == 0xff800000u);
}
