// kernels/log1p.h: the project's log1p for the data transform, against
// double-precision std::log1p (the correctly rounded float is within half
// an ulp of it), over every value a uint16 count can take, random bit
// patterns and a dense range around 0, plus the edge cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/log1p.h"

using mrmf::kernels::log1p_f32;

namespace {

// Distance in units in the last place, over the float line ordered as integers.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  const int64_t oa = ia < 0 ? int64_t(INT32_MIN) - ia : ia, ob = ib < 0 ? int64_t(INT32_MIN) - ib : ib;
  return oa > ob ? oa - ob : ob - oa;
}

float reference(float x) { return static_cast<float>(std::log1p(static_cast<double>(x))); }

struct Worst {
  int64_t ulps = 0;
  float at = 0;
  void add(float x) {
    const int64_t d = ulp_distance(log1p_f32(x), reference(x));
    if (d > ulps) {
      ulps = d;
      at = x;
    }
  }
};

}  // namespace

TEST_CASE("log1p_f32 is within 1 ulp of log1p on every uint16 count") {
  Worst w;
  int64_t exact = 0;
  for (int v = 0; v <= 65535; ++v) {
    w.add(static_cast<float>(v));
    exact += log1p_f32(static_cast<float>(v)) == reference(static_cast<float>(v));
  }
  INFO("worst " << w.ulps << " ulp at " << w.at);
  CHECK(w.ulps <= 1);
  CHECK(exact > 65536 * 95 / 100);  // mostly the correctly rounded value
}

TEST_CASE("log1p_f32 is within 1 ulp of log1p over the float line") {
  std::mt19937 gen(7);
  Worst bits_w, near0_w, tiny_w;
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t b = gen();
    float x;
    std::memcpy(&x, &b, 4);
    if (x > -1.f && std::isfinite(x)) bits_w.add(x);  // every exponent, both signs
  }
  std::uniform_real_distribution<float> near0(-1.f, 4.f);
  for (int i = 0; i < 2000000; ++i) near0_w.add(near0(gen));  // where 1 + x rounds
  for (int e = -149; e <= -20; ++e)                             // 1 + x == 1: log1p(x) = x
    for (float s : {1.f, -1.f}) tiny_w.add(s * std::ldexp(1.f, e));
  INFO("random bits: " << bits_w.ulps << " ulp at " << bits_w.at << "; (-1, 4): " << near0_w.ulps << " at "
                       << near0_w.at << "; tiny: " << tiny_w.ulps << " at " << tiny_w.at);
  CHECK(bits_w.ulps <= 1);
  CHECK(near0_w.ulps <= 1);
  CHECK(tiny_w.ulps == 0);
  CHECK(log1p_f32(std::nextafter(-1.f, 0.f)) == reference(std::nextafter(-1.f, 0.f)));
  CHECK(log1p_f32(std::numeric_limits<float>::max()) == reference(std::numeric_limits<float>::max()));
}

TEST_CASE("log1p_f32 edge cases: -1, below -1, NaN, infinity, zero") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(log1p_f32(-1.f) == -inf);
  CHECK(std::isnan(log1p_f32(-1.5f)));
  CHECK(std::isnan(log1p_f32(-inf)));
  CHECK(std::isnan(log1p_f32(nan)));
  CHECK(std::isnan(log1p_f32(-nan)));
  CHECK(log1p_f32(inf) == inf);
  CHECK(log1p_f32(0.f) == 0.f);
  CHECK(log1p_f32(1.f) == reference(1.f));
}

TEST_CASE("log1p_f32 gives the same bits in a vectorized loop as call by call") {
  // g++ vectorizes this loop (the point of the straight-line form); the
  // volatile round trip keeps the second one scalar. IEEE operations only:
  // the lanes must match the scalar code exactly.
  std::vector<float> x(4099), vec(x.size()), one(x.size());
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> d(-1.f, 70000.f);
  for (float& v : x) v = d(gen);
  x[5] = -1.f;
  x[6] = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < x.size(); ++i) vec[i] = log1p_f32(x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    volatile float v = x[i];
    one[i] = log1p_f32(v);
  }
  CHECK(std::memcmp(vec.data(), one.data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("log_pow2_f32: log(p * 2^e2) within 1 ulp, the exponent exact, and its edge cases") {
  using mrmf::kernels::log_pow2_f32;
  using mrmf::kernels::log_pow2_normal_f32;
  // What the fused downsample's products take (kernels/log1p_products.h):
  // p in [2^-120, 2^120], e2 = 8 * cells for 4 to 15 cells; and wider.
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> ex(-125, 125), e2s(0, 130);
  int64_t worst = 0;
  float worst_p = 0;
  int worst_e2 = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float p = std::ldexp(mant(gen), ex(gen));
    const int e2 = e2s(gen);
    const double want = std::log(static_cast<double>(p)) + e2 * std::log(2.0);
    const float got = log_pow2_f32(p, e2);
    const int64_t d = ulp_distance(got, static_cast<float>(want));
    if (d > worst) {
      worst = d;
      worst_p = p;
      worst_e2 = e2;
    }
    const float normal = log_pow2_normal_f32(p, e2);
    if (std::memcmp(&got, &normal, 4) != 0) FAIL_CHECK("the normal variant differs at p " << p << ", e2 " << e2);
  }
  INFO("worst " << worst << " ulp at p " << worst_p << ", e2 " << worst_e2);
  CHECK(worst <= 1);
  // Exactly k ln 2 at powers of two; 2^-e2 * 2^e2 = 1 gives exactly 0.
  CHECK(log_pow2_f32(std::ldexp(1.f, -64), 64) == 0.f);
  CHECK(log_pow2_f32(std::ldexp(1.f, -120), 120) == 0.f);
  CHECK(log_pow2_f32(1.f, 3) == static_cast<float>(3 * std::log(2.0)));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(log_pow2_f32(0.f, 64) == -inf);
  CHECK(log_pow2_f32(-0.f, 64) == -inf);
  CHECK(log_pow2_f32(inf, 8) == inf);
  CHECK(std::isnan(log_pow2_f32(nan, 8)));
  CHECK(std::isnan(log_pow2_f32(-2.f, 8)));
  CHECK(std::isnan(log_pow2_f32(-inf, 8)));
}
