#include <catch2/catch.hpp>

#include <cmath>

#include "layers/linear.h"
#include "support/finite_diff.h"
#include "support/reference_ops.h"

using namespace mrmf;

namespace {
struct LinearFixture {
  Model m;
  Linear* fc;
  LinearFixture(int64_t in, int64_t out, bool bias = true, uint64_t seed = 3,
                InitScheme scheme = InitScheme::PyTorchDefault)
      : m("t", Shape{in}) {
    fc = &m.net().add("fc", std::make_unique<Linear>(in, out, bias), ParamGroup::Top);
    m.build(Device::cpu(), seed, scheme);
  }
};
}  // namespace

TEST_CASE("linear: parameters use PyTorch names and layout", "[linear]") {
  LinearFixture f(7, 5);
  const ParamStore& s = f.m.params();
  REQUIRE(s.info(s.at("fc.weight")).shape == Shape{5, 7});
  REQUIRE(s.info(s.at("fc.bias")).shape == Shape{5});
  REQUIRE(s.info(s.at("fc.weight")).group == ParamGroup::Top);
  REQUIRE(s.num_parameters() == 5 * 7 + 5);
  LinearFixture nb(7, 5, false);
  REQUIRE(nb.m.params().find("fc.bias") < 0);
  REQUIRE_FALSE(nb.fc->bias().defined());
}

TEST_CASE("linear: PyTorch default and Glorot initialisation bounds", "[linear]") {
  const int64_t in = 300, out = 40;
  LinearFixture f(in, out);
  const float bound = 1.f / std::sqrt(float(in));
  auto check_range = [](const Tensor& t, float b) {
    double lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < t.numel(); ++i) {
      lo = std::min(lo, double(t.data<float>()[i]));
      hi = std::max(hi, double(t.data<float>()[i]));
    }
    REQUIRE(lo >= -b);
    REQUIRE(hi <= b);
    // Uniform over the whole interval: extremes come close to the bound.
    REQUIRE(hi > 0.8 * b);
    REQUIRE(lo < -0.8 * b);
  };
  check_range(f.fc->weight(), bound);
  check_range(f.fc->bias(), bound);
  // Weight and bias draw different streams (the bias is not the weight's first row).
  REQUIRE(f.fc->bias().data<float>()[0] != f.fc->weight().data<float>()[0]);
  // Same seed -> same values; different seed -> different values.
  LinearFixture same(in, out), other(in, out, true, 4);
  REQUIRE(test::max_abs_diff(same.fc->weight(), f.fc->weight()) == 0.0);
  REQUIRE(test::max_abs_diff(other.fc->weight(), f.fc->weight()) > 0.0);

  LinearFixture g(in, out, true, 3, InitScheme::GlorotUniform);
  check_range(g.fc->weight(), std::sqrt(6.f / float(in + out)));
  for (int64_t i = 0; i < out; ++i) REQUIRE(g.fc->bias().data<float>()[i] == 0.f);
}

TEST_CASE("linear: forward and backward match the double reference", "[linear]") {
  const int64_t N = 6, in = 37, out = 11;  // odd sizes: no accidental alignment
  for (bool bias : {true, false}) {
    LinearFixture f(in, out, bias);
    Context ctx(Device::cpu());
    Tensor x = test::random_tensor({N, in}, 11);
    Tensor y = f.fc->forward(ctx, x);
    REQUIRE(y.shape() == Shape{N, out});
    const auto w = ref::to_vec(f.fc->weight());
    const auto b = bias ? ref::to_vec(f.fc->bias()) : std::vector<double>{};
    const auto xv = ref::to_vec(x);
    REQUIRE(test::max_abs_diff(y, ref::from_vec(ref::linear(xv, w, b, N, in, out), {N, out})) < 1e-5);

    Tensor dy = test::random_tensor({N, out}, 12);
    const auto dyv = ref::to_vec(dy);
    Tensor dx = f.fc->backward(ctx, dy, true);
    std::vector<double> dw(size_t(out * in), 0.0), db(size_t(out), 0.0), dxr(size_t(N * in), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < out; ++o) {
        const double g = dyv[size_t(n * out + o)];
        db[size_t(o)] += g;
        for (int64_t i = 0; i < in; ++i) {
          dw[size_t(o * in + i)] += g * xv[size_t(n * in + i)];
          dxr[size_t(n * in + i)] += g * w[size_t(o * in + i)];
        }
      }
    const ParamStore& s = f.m.params();
    REQUIRE(test::max_abs_diff(s.grad(s.at("fc.weight")), ref::from_vec(dw, {out, in})) < 1e-5);
    if (bias) REQUIRE(test::max_abs_diff(s.grad(s.at("fc.bias")), ref::from_vec(db, {out})) < 1e-5);
    REQUIRE(test::max_abs_diff(dx, ref::from_vec(dxr, {N, in})) < 1e-5);

    // Gradients overwrite: a second identical pass gives the same gradient, not twice it.
    f.fc->forward(ctx, x);
    Tensor dx2 = f.fc->backward(ctx, dy, false);
    REQUIRE_FALSE(dx2.defined());
    REQUIRE(test::max_abs_diff(s.grad(s.at("fc.weight")), ref::from_vec(dw, {out, in})) < 1e-5);
  }
}

TEST_CASE("linear: gradients agree with finite differences", "[linear]") {
  LinearFixture f(9, 4);
  Context ctx(Device::cpu());
  Tensor x = test::random_tensor({3, 9}, 21);
  test::GradCheckOptions opt;
  opt.eps = 1e-2;
  const auto rep = test::check_gradients(f.m.net(), ctx, x, opt);
  INFO(rep.worst);
  REQUIRE(rep.checked > 0);
  REQUIRE(rep.skipped_kinks == 0);  // a linear map has no kinks
  REQUIRE(rep.input_err < 1e-2);
  REQUIRE(rep.param_err < 1e-2);
}

TEST_CASE("linear: batch of one and an empty batch", "[linear]") {
  LinearFixture f(5, 3);
  Context ctx(Device::cpu());
  Tensor x = test::random_tensor({1, 5}, 2);
  REQUIRE(f.fc->forward(ctx, x).shape() == Shape{1, 3});
  Tensor e = Tensor::empty({0, 5});
  REQUIRE(f.fc->forward(ctx, e).shape() == Shape{0, 3});
  Tensor dx = f.fc->backward(ctx, Tensor::empty({0, 3}), true);
  REQUIRE(dx.shape() == Shape{0, 5});
  const ParamStore& s = f.m.params();
  REQUIRE(test::max_abs_diff(s.grad(s.at("fc.weight")), Tensor::full({3, 5}, 0.f)) == 0.0);
  REQUIRE(test::max_abs_diff(s.grad(s.at("fc.bias")), Tensor::full({3}, 0.f)) == 0.0);
}

TEST_CASE("linear: misuse names the layer and the shapes", "[linear]") {
  Model m("t", Shape{4320});
  auto& fc = m.net().add("fc1", std::make_unique<Linear>(4320, 8), ParamGroup::Top);
  m.build(Device::cpu(), 1);
  Context ctx(Device::cpu());
  try {
    fc.forward(ctx, Tensor::full({8, 1980}, 0.f));
    FAIL("no exception");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Shape);
    REQUIRE_THAT(e.what(), Catch::Contains("Linear 'fc1': expected input [N, 4320], got [8, 1980]"));
  }
  REQUIRE_THROWS_WITH(fc.forward(ctx, Tensor::full({2, 3, 4320}, 0.f)),
                      Catch::Contains("Linear 'fc1'") && Catch::Contains("[2, 3, 4320]"));
  REQUIRE_THROWS_WITH(fc.output_shape(Shape{2, 10}), Catch::Contains("Linear 'fc1'") && Catch::Contains("[2, 10]"));
  REQUIRE(fc.output_shape(Shape{2, 4320}) == Shape{2, 8});
  REQUIRE_THROWS_WITH(fc.backward(ctx, Tensor::full({2, 8}, 0.f), true), Catch::Contains("without a training-mode forward"));
  fc.forward(ctx, Tensor::full({2, 4320}, 0.f));
  REQUIRE_THROWS_WITH(fc.backward(ctx, Tensor::full({3, 8}, 0.f), true),
                      Catch::Contains("Linear 'fc1'") && Catch::Contains("[2, 8]") && Catch::Contains("[3, 8]"));
  REQUIRE_THROWS_AS(Linear(0, 3), Error);
}

TEST_CASE("linear: eval-mode forward keeps nothing for backward", "[linear]") {
  LinearFixture f(4, 2);
  Context ctx(Device::cpu());
  ctx.set_training(false);
  f.fc->forward(ctx, test::random_tensor({2, 4}, 1));
  REQUIRE_THROWS_WITH(f.fc->backward(ctx, Tensor::full({2, 2}, 0.f), true), Catch::Contains("training-mode"));
}
