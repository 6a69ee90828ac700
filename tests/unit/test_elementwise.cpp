// Element-wise functor kernels against their closed forms on the CPU.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/elementwise_ops.h"
#include "kernels/philox.h"
#include "support/finite_diff.h"

using namespace mrmf;

TEST_CASE("elementwise: leaky relu forward/backward closed form", "[kernels]") {
  Tensor x = test::random_tensor({3, 40000}, 1);  // large enough for the OpenMP path
  x.data<float>()[0] = 0.f;                        // the kink
  Tensor y = Tensor::empty(x.shape()), dy = test::random_tensor(x.shape(), 2), dx = Tensor::empty(x.shape());
  for (float slope : {0.f, 0.01f, 0.3f}) {
    kernels::leaky_relu_forward(cpu_stream(), x, y, slope);
    kernels::leaky_relu_backward(cpu_stream(), x, dy, dx, slope);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.data<float>()[i];
      REQUIRE(y.data<float>()[i] == (v > 0 ? v : slope * v));
      REQUIRE(dx.data<float>()[i] == (v > 0 ? dy.data<float>()[i] : slope * dy.data<float>()[i]));
    }
  }
}

TEST_CASE("elementwise: bias add and bias gradient", "[kernels]") {
  const int64_t N = 3, C = 4, L = 5;
  Tensor y = Tensor::full({N, C, L}, 1.f), b = test::random_tensor({C}, 3);
  kernels::bias_add(cpu_stream(), y, b);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t l = 0; l < L; ++l) REQUIRE(y.at({n, c, l}) == 1.f + b.at({c}));
  Tensor dy = test::random_tensor({N, C, L}, 4), db = Tensor::empty({C});
  kernels::bias_grad(cpu_stream(), dy, db);
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l) s += dy.at({n, c, l});
    REQUIRE(db.at({c}) == Approx(s).margin(1e-6));
  }
  REQUIRE_THROWS_WITH(kernels::bias_add(cpu_stream(), y, Tensor::empty({C + 1})),
                      Catch::Contains("[5]") && Catch::Contains("[3, 4, 5]"));
}

TEST_CASE("elementwise: bias add and gradient of an empty batch", "[kernels]") {
  // The channel's inner size comes from the shape, not numel / (N C): an
  // empty batch is no division by zero, and its bias gradient is 0.
  const Tensor y = Tensor::empty({0, 4, 5}), b = Tensor::full({4}, 1.f);
  kernels::bias_add(cpu_stream(), y, b);
  Tensor db = Tensor::full({4}, 7.f);
  kernels::bias_grad(cpu_stream(), y, db);
  for (int64_t c = 0; c < 4; ++c) CHECK(db.at({c}) == 0.f);
}

TEST_CASE("elementwise: MSE loss and gradient", "[kernels]") {
  Tensor p = test::random_tensor({8, 19}, 5), t = test::random_tensor({8, 19}, 6);
  double s = 0;
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double d = double(p.data<float>()[i]) - t.data<float>()[i];
    s += d * d;
  }
  REQUIRE(kernels::mse_loss(cpu_stream(), p, t) == Approx(s / p.numel()).epsilon(1e-6));
  Tensor g = Tensor::empty(p.shape());
  kernels::mse_grad(cpu_stream(), p, t, g);
  for (int64_t i = 0; i < p.numel(); ++i)
    REQUIRE(g.data<float>()[i] == Approx(2.0 * (p.data<float>()[i] - t.data<float>()[i]) / p.numel()));
  REQUIRE_THROWS_WITH(kernels::mse_loss(cpu_stream(), p, Tensor::empty({8, 4})), Catch::Contains("[8, 4]"));
}

TEST_CASE("elementwise: reductions are independent of the thread count", "[kernels]") {
  Tensor x = test::random_tensor({1 << 20}, 9);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const float one = kernels::sum_of_squares(cpu_stream(), x);
  omp_set_num_threads(2);
  const float two = kernels::sum_of_squares(cpu_stream(), x);
  omp_set_num_threads(saved);
  REQUIRE(one == two);  // bit-identical
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += double(x.data<float>()[i]) * x.data<float>()[i];
  REQUIRE(one == Approx(s).epsilon(1e-6));
}

TEST_CASE("elementwise: non-finite values are counted", "[kernels]") {
  Tensor x = Tensor::full({100}, 1.f);
  REQUIRE(kernels::count_nonfinite(cpu_stream(), x) == 0);
  x.data<float>()[3] = NAN;
  x.data<float>()[50] = INFINITY;
  x.data<float>()[51] = -INFINITY;
  REQUIRE(kernels::count_nonfinite(cpu_stream(), x) == 3);
}

TEST_CASE("elementwise: axpby and fill", "[kernels]") {
  Tensor x = test::random_tensor({1000}, 10), y = test::random_tensor({1000}, 11);
  Tensor y0 = y.clone();
  kernels::axpby(cpu_stream(), x, y, 2.f, -0.5f);
  for (int64_t i = 0; i < 1000; ++i)
    REQUIRE(y.data<float>()[i] == Approx(2.f * x.data<float>()[i] - 0.5f * y0.data<float>()[i]));
  kernels::fill(cpu_stream(), y, 7.f);
  REQUIRE(y.data<float>()[999] == 7.f);
}

TEST_CASE("philox: known-answer test and uniform statistics", "[kernels][philox]") {
  // Known-answer vectors from the Random123 distribution (kat_vectors):
  // philox4x32 10 rounds, counter = key = 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
  auto r = kernels::philox4x32_10(0, 0, 0, 0, 0, 0);
  REQUIRE(r.v[0] == 0x6627e8d5u);
  REQUIRE(r.v[1] == 0xe169c58du);
  REQUIRE(r.v[2] == 0xbc57ac4cu);
  REQUIRE(r.v[3] == 0x9b00dbd8u);
  // all ones -> 408f276d 41c83b0e a20bc7c6 6d5451fd
  auto q = kernels::philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  REQUIRE(q.v[0] == 0x408f276du);
  REQUIRE(q.v[3] == 0x6d5451fdu);
  double mean = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = kernels::philox_uniform(42, 7, static_cast<uint64_t>(i));
    REQUIRE(u >= 0.f);
    REQUIRE(u < 1.f);
    mean += u;
  }
  REQUIRE(mean / n == Approx(0.5).margin(0.005));
  REQUIRE(kernels::philox_uniform(42, 7, 5) != kernels::philox_uniform(42, 8, 5));
}
