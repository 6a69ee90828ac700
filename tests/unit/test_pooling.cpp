// Pooling: functors vs plain-loop references (forward, argmax, backward by
// scatter), layer gradients vs finite differences, determinism, misuse.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/fastdiv.h"
#include "kernels/philox.h"
#include "kernels/pooling_ops.h"
#include "layers/pooling.h"
#include "support/finite_diff.h"
#include "support/reference_pool_bn.h"

using namespace mrmf;
using kernels::PoolParams;

namespace {
struct PoolCase {
  const char* name;
  Shape in;
  PoolParams p;
};

std::vector<PoolCase> cases() {
  return {
      {"1d k4 (Neuron Inverter)", Shape{2, 3, 17}, PoolParams::make_1d(4)},
      {"1d k3 s2 p1", Shape{2, 2, 11}, PoolParams::make_1d(3, 2, 1)},
      {"1d k3 s2 p1 no-pad-count", Shape{2, 2, 10}, PoolParams::make_1d(3, 2, 1, false)},
      {"1d k2 s3", Shape{1, 2, 9}, PoolParams::make_1d(2, 3)},
      {"3d k2 (CosmoFlow / MLPerf)", Shape{2, 2, 4, 5, 6}, PoolParams::make_3d({2, 2, 2})},
      {"3d k3 s2 p1 (LBANN)", Shape{1, 2, 5, 6, 7}, PoolParams::make_3d({3, 3, 3}, {2, 2, 2}, {1, 1, 1})},
      {"3d k3 s2 p1 no-pad-count", Shape{1, 2, 5, 4, 6},
       PoolParams::make_3d({3, 3, 3}, {2, 2, 2}, {1, 1, 1}, false)},
      {"3d anisotropic", Shape{2, 1, 3, 6, 8}, PoolParams::make_3d({1, 2, 3}, {1, 2, 2}, {0, 1, 1})},
  };
}
}  // namespace

TEST_CASE("pooling: forward, argmax and backward match the plain loops", "[pool]") {
  for (const auto& pc : cases()) {
    for (bool is_max : {true, false}) {
      INFO(pc.name << (is_max ? " max" : " avg"));
      const Tensor x = test::random_tensor(pc.in, 11);
      std::vector<int64_t> ref_arg;
      const Tensor y_ref = ref::pool_forward(x, is_max, pc.p, &ref_arg);
      Tensor y = Tensor::empty(y_ref.shape());
      Tensor arg = Tensor::empty(y_ref.shape(), DType::I32);
      if (is_max)
        kernels::max_pool_forward(cpu_stream(), x, y, arg, pc.p);
      else
        kernels::avg_pool_forward(cpu_stream(), x, y, pc.p);
      REQUIRE(test::max_abs_diff(y, y_ref) < 1e-6);
      if (is_max)
        for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(arg.data<int32_t>()[i] == ref_arg[static_cast<size_t>(i)]);

      const Tensor dy = test::random_tensor(y_ref.shape(), 12);
      const Tensor dx_ref = ref::pool_backward(x, dy, is_max, pc.p);
      Tensor dx = Tensor::full(pc.in, 123.f);  // every element must be overwritten
      if (is_max)
        kernels::max_pool_backward(cpu_stream(), dy, arg, dx, pc.p);
      else
        kernels::avg_pool_backward(cpu_stream(), dy, dx, pc.p);
      REQUIRE(test::max_abs_diff(dx, dx_ref) < 1e-6);
    }
  }
}

TEST_CASE("pooling: output sizes follow PyTorch's floor rule", "[pool]") {
  REQUIRE(kernels::pool_output_shape({512, 30, 1597}, PoolParams::make_1d(4), "t") == Shape{512, 30, 399});
  REQUIRE(kernels::pool_output_shape({1, 4, 128, 128, 128}, PoolParams::make_3d({2, 2, 2}), "t") ==
          Shape{1, 4, 64, 64, 64});
  REQUIRE(kernels::pool_output_shape({1, 4, 9, 9, 9}, PoolParams::make_3d({3, 3, 3}, {2, 2, 2}, {1, 1, 1}), "t") ==
          Shape{1, 4, 5, 5, 5});
}

TEST_CASE("pooling: a max with NaN propagates NaN, all -inf keeps the first index", "[pool]") {
  Tensor x = Tensor::full({1, 1, 8}, 0.f);
  x.data<float>()[5] = std::nanf("");
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = -INFINITY;
  Tensor y = Tensor::empty({1, 1, 2}), arg = Tensor::empty({1, 1, 2}, DType::I32);
  kernels::max_pool_forward(cpu_stream(), x, y, arg, PoolParams::make_1d(4));
  REQUIRE(std::isinf(y.data<float>()[0]));
  REQUIRE(arg.data<int32_t>()[0] == 0);
  REQUIRE(std::isnan(y.data<float>()[1]));
  REQUIRE(arg.data<int32_t>()[1] == 5);
}

namespace {
template <class L>
void grad_check_layer(std::unique_ptr<L> layer, const Shape& in) {
  const std::vector<int64_t> d = in.vec();
  const Shape sample(std::vector<int64_t>(d.begin() + 1, d.end()));
  Model m("t", sample);
  L& ref = m.net().add("pool", std::move(layer), ParamGroup::Bottom);
  m.build(Device::cpu(), 1);
  Context ctx(Device::cpu());
  const auto rep = test::check_gradients(ref, ctx, test::random_tensor(in, 21));
  INFO(ref.type() << " worst: " << rep.worst);
  REQUIRE(rep.checked > 10);
  REQUIRE(rep.input_err < 2e-2);
}
}  // namespace

TEST_CASE("pooling layers: backward matches finite differences", "[pool]") {
  grad_check_layer(std::make_unique<MaxPool1d>(4), {2, 3, 16});
  grad_check_layer(std::make_unique<AvgPool1d>(3, 2, 1), {2, 3, 13});
  grad_check_layer(std::make_unique<MaxPool3d>(2), {1, 2, 4, 4, 6});
  grad_check_layer(std::make_unique<AvgPool3d>(3, 2, 1), {1, 2, 5, 5, 5});
  grad_check_layer(std::make_unique<AvgPool3d>(2), {2, 2, 4, 4, 4});
}

TEST_CASE("pooling: backward is deterministic across thread counts", "[pool]") {
  const Shape in{4, 8, 2051};  // above the serial threshold
  const auto p = PoolParams::make_1d(3, 2, 1);
  const Shape out = kernels::pool_output_shape(in, p, "t");
  const Tensor x = test::random_tensor(in, 3), dy = test::random_tensor(out, 4);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Tensor y = Tensor::empty(out), arg = Tensor::empty(out, DType::I32), dmax = Tensor::empty(in),
           davg = Tensor::empty(in);
    kernels::max_pool_forward(cpu_stream(), x, y, arg, p);
    kernels::max_pool_backward(cpu_stream(), dy, arg, dmax, p);
    kernels::avg_pool_backward(cpu_stream(), dy, davg, p);
    return std::make_pair(dmax, davg);
  };
  const int before = omp_get_max_threads();
  auto a = run(1), b = run(2);
  omp_set_num_threads(before);
  REQUIRE(std::memcmp(a.first.raw_data(), b.first.raw_data(), a.first.nbytes()) == 0);
  REQUIRE(std::memcmp(a.second.raw_data(), b.second.raw_data(), a.second.nbytes()) == 0);
}

TEST_CASE("pooling layers: misuse names the layer and the shapes", "[pool]") {
  Model m("t", Shape{30, 3});
  auto& pool = m.net().add("pool3", std::make_unique<MaxPool1d>(4), ParamGroup::Bottom);
  m.build(Device::cpu(), 1);
  Context ctx(Device::cpu());
  try {
    pool.forward(ctx, Tensor::full({2, 30, 3}, 0.f));
    FAIL("expected a Shape error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Shape);
    REQUIRE_THAT(e.what(), Catch::Contains("MaxPool1d 'pool3': input length 3 < kernel 4"));
  }
  REQUIRE_THROWS_WITH(pool.forward(ctx, Tensor::full({2, 30, 3, 3, 3}, 0.f)),
                      Catch::Contains("MaxPool1d 'pool3'") && Catch::Contains("[N, C, L]") &&
                          Catch::Contains("[2, 30, 3, 3, 3]"));
  AvgPool3d avg(2);
  avg.set_name("p");
  REQUIRE_THROWS_WITH(avg.output_shape({1, 1, 4, 1, 4}), Catch::Contains("AvgPool3d 'p': input height 1 < kernel 2"));
  REQUIRE_THROWS_AS(MaxPool1d(2, 1, 2), Error);  // padding > kernel / 2
  REQUIRE_THROWS_WITH(pool.backward(ctx, Tensor::full({2, 30, 1}, 0.f), true), Catch::Contains("backward without"));
}

TEST_CASE("pooling layers: eval mode keeps nothing for backward", "[pool]") {
  Model m("t", Shape{2, 8});
  auto& pool = m.net().add("pool", std::make_unique<MaxPool1d>(2), ParamGroup::Bottom);
  m.build(Device::cpu(), 1);
  Context ctx(Device::cpu());
  ctx.set_training(false);
  const Tensor y = pool.forward(ctx, test::random_tensor({1, 2, 8}, 1));
  REQUIRE(y.shape() == Shape{1, 2, 4});
  REQUIRE_THROWS_WITH(pool.backward(ctx, y, true), Catch::Contains("backward without a training-mode forward"));
}

TEST_CASE("fastdiv: exact quotients for small, power-of-two and huge divisors", "[pool]") {
  const std::vector<int64_t> divisors = {1, 2, 3, 4, 5, 7, 30, 399, 1597, 4096, 1000003, (int64_t(1) << 31) + 11,
                                         (int64_t(1) << 62) + 5, INT64_MAX};
  for (int64_t d : divisors) {
    const kernels::FastDiv f(d);
    for (uint64_t k = 0; k < 2000; ++k) {
      const uint64_t r = (uint64_t(kernels::philox_uniform(1, 2, k) * 16777216.0f) << 40) ^
                         (uint64_t(kernels::philox_uniform(1, 3, k) * 16777216.0f) << 16) ^ k;
      for (uint64_t n : {k, r, r >> 20, r >> 40, ~uint64_t(0) - k, uint64_t(d) * k, uint64_t(d) * k - 1})
        REQUIRE(f.div(n) == n / uint64_t(d));
    }
  }
}
