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
