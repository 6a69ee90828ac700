// Conv1d / Conv3d on the CPU (oneDNN) against the double-precision plain-loop
// reference, central finite differences, PyTorch's init bounds, error
// messages and the primitive cache.
#include <catch2/catch.hpp>
#include <cmath>

#include "layers/conv.h"
#include "support/finite_diff.h"
#include "support/reference_conv.h"
#include "support/reference_ops.h"

using namespace mrmf;

namespace {

struct Case {
  int dims;
  int64_t N, C, O;
  std::vector<int64_t> spatial, k, s, p;
  bool bias;
};

std::unique_ptr<Conv> make_conv(const Case& c) {
  if (c.dims == 1) return std::make_unique<Conv1d>(c.C, c.O, c.k[0], c.s[0], c.p[0], c.bias);
  return std::make_unique<Conv3d>(c.C, c.O, c.k, c.s, c.p, c.bias);
}

Shape sample_shape(const Case& c) {
  std::vector<int64_t> d{c.C};
  d.insert(d.end(), c.spatial.begin(), c.spatial.end());
  return Shape(d);
}

Shape batch_shape(const Case& c) {
  std::vector<int64_t> d{c.N, c.C};
  d.insert(d.end(), c.spatial.begin(), c.spatial.end());
  return Shape(d);
}

// A model holding just the convolution, built on the CPU.
struct Fixture {
  std::unique_ptr<Model> model;
  Conv* conv = nullptr;
  Fixture(const Case& c, uint64_t seed = 1, InitScheme scheme = InitScheme::PyTorchDefault) {
    model = std::make_unique<Model>("t", sample_shape(c));
    conv = &model->net().add("conv", make_conv(c), ParamGroup::Bottom);
    model->build(Device::cpu(), seed, scheme);
  }
};

std::string describe(const Case& c) {
  std::string s = "dims " + std::to_string(c.dims) + " N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " O" +
                  std::to_string(c.O) + " spatial";
  for (auto v : c.spatial) s += " " + std::to_string(v);
  s += " k" + std::to_string(c.k[0]) + " s" + std::to_string(c.s[0]) + " p" + std::to_string(c.p[0]) +
       (c.bias ? " bias" : " nobias");
  return s;
}

double max_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double m = 0, d = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    m = std::max(m, std::fabs(want[i]));
    d = std::max(d, std::fabs(got[i] - want[i]));
  }
  return d / (m + 1e-12);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> cs = {
      {1, 2, 3, 5, {17}, {4}, {1}, {0}, true},
      {1, 3, 4, 6, {16}, {4}, {2}, {0}, true},   // stride 2, even length
      {1, 2, 5, 3, {15}, {3}, {2}, {1}, false},  // odd length, padding, no bias
      {1, 1, 2, 2, {8}, {3}, {2}, {0}, true},    // stride 2 drops the last input sample
      {1, 2, 17, 16, {9}, {5}, {1}, {2}, true},  // 'same' padding, blocked channel counts
      {3, 2, 3, 4, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true},
      {3, 1, 4, 5, {7, 6, 5}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, false},
      {3, 2, 2, 3, {4, 5, 6}, {2, 3, 1}, {2, 1, 1}, {0, 1, 0}, true},  // anisotropic
      {3, 2, 16, 17, {4, 4, 4}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true},
      // One output position (the GEMM path, layers/conv_single_output.h):
      {3, 3, 5, 7, {1, 1, 1}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true},   // centre tap only (CosmoFlow's conv5-7)
      {3, 2, 4, 6, {2, 2, 2}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, false},  // 8 taps meet every input (conv4 at 16^3)
      {3, 2, 3, 2, {2, 1, 4}, {3, 1, 3}, {2, 1, 2}, {1, 0, 0}, true},   // 6 taps; input x = 3 meets none
      {1, 3, 2, 4, {4}, {3}, {2}, {0}, true},                           // 1-D, the last sample meets no tap
      {1, 2, 3, 4, {1}, {1}, {4}, {1}, true},                           // no tap meets the input: bias only
      {3, 2, 3, 4, {3, 3, 3}, {3, 3, 3}, {1, 1, 1}, {0, 0, 0}, true},   // kernel = input, no padding: every tap
      {3, 2, 2, 3, {2, 1, 1}, {3, 1, 1}, {2, 4, 1}, {1, 1, 0}, true},   // no tap along y (padding >= kernel)
  };
  return cs;
}

}  // namespace

TEST_CASE("conv: forward and backward match the plain-loop reference", "[conv]") {
  for (const Case& c : cases()) {
    INFO(describe(c));
    Fixture f(c);
    Context ctx(Device::cpu());
    Tensor x = test::random_tensor(batch_shape(c), 11);
    Tensor y = f.conv->forward(ctx, x);
    REQUIRE(y.shape() == f.conv->output_shape(x.shape()));

    const auto g = ref::conv_geom(x.shape(), f.conv->weight().shape(), c.s, c.p);
    const auto xv = ref::to_vec(x), wv = ref::to_vec(f.conv->weight());
    const auto bv = c.bias ? ref::to_vec(f.conv->bias()) : std::vector<double>{};
    const auto yr = ref::conv_forward(g, xv, wv, bv);
    REQUIRE(static_cast<int64_t>(yr.size()) == y.numel());
    CHECK(max_rel(ref::to_vec(y), yr) < 1e-5);

    Tensor dy = test::random_tensor(y.shape(), 12);
    Tensor dx = f.conv->backward(ctx, dy, true);
    const auto dyv = ref::to_vec(dy);
    CHECK(max_rel(ref::to_vec(dx), ref::conv_backward_data(g, dyv, wv)) < 1e-5);
    std::vector<double> dw, db;
    ref::conv_backward_weights(g, xv, dyv, dw, db);
    ParamStore& ps = f.model->params();
    CHECK(max_rel(ref::to_vec(ps.grad(ps.at("conv.weight"))), dw) < 1e-5);
    if (c.bias) CHECK(max_rel(ref::to_vec(ps.grad(ps.at("conv.bias"))), db) < 1e-5);
  }
}

TEST_CASE("conv: gradients match central finite differences", "[conv]") {
  for (const Case& c : {Case{1, 2, 3, 4, {11}, {4}, {2}, {1}, true},
                        Case{3, 1, 2, 3, {5, 4, 5}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, true},
                        Case{3, 2, 3, 4, {2, 1, 4}, {3, 1, 3}, {2, 1, 2}, {1, 0, 0}, true}}) {  // one output position
    INFO(describe(c));
    Fixture f(c);
    Context ctx(Device::cpu());
    test::GradCheckOptions opt;
    opt.eps = 1e-2;
    opt.tol = 1e-2;
    auto rep = test::check_gradients(*f.conv, ctx, test::random_tensor(batch_shape(c), 3), opt);
    INFO(rep.worst);
    CHECK(rep.checked > 40);
    CHECK(rep.input_err < opt.tol);
    CHECK(rep.param_err < opt.tol);
  }
}

TEST_CASE("conv: gradients are overwritten, dx skipped when not needed", "[conv]") {
  Case c{1, 2, 3, 4, {12}, {3}, {1}, {1}, true};
  Fixture f(c);
  Context ctx(Device::cpu());
  Tensor x = test::random_tensor(batch_shape(c), 5);
  Tensor dy = test::random_tensor(f.conv->output_shape(x.shape()), 6);
  f.conv->forward(ctx, x);
  Tensor dx = f.conv->backward(ctx, dy, true);
  Tensor g1 = f.model->params().grads().clone();
  f.conv->forward(ctx, x);
  Tensor none = f.conv->backward(ctx, dy, false);
  CHECK_FALSE(none.defined());
  CHECK(test::max_abs_diff(f.model->params().grads(), g1) == 0.0);  // same, not doubled
  // Eval-mode forward keeps nothing: backward must refuse.
  ctx.set_training(false);
  f.conv->forward(ctx, x);
  REQUIRE_THROWS_WITH(f.conv->backward(ctx, dy, true), Catch::Contains("without a training-mode forward"));
}

TEST_CASE("conv: PyTorch default init bounds, Glorot, determinism per seed", "[conv]") {
  Case c{3, 1, 4, 6, {4, 4, 4}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true};
  Fixture a(c, 42), b(c, 42), other(c, 43);
  const double bound = 1.0 / std::sqrt(4.0 * 27.0);
  auto check_range = [](const Tensor& t, double bnd) {
    auto v = ref::to_vec(t);
    double mx = 0;
    for (double e : v) mx = std::max(mx, std::fabs(e));
    CHECK(mx <= bnd * (1 + 1e-6));
    CHECK(mx > 0.8 * bnd);  // actually spans the range
  };
  check_range(a.conv->weight(), bound);
  check_range(a.conv->bias(), bound);
  CHECK(test::max_abs_diff(a.model->params().values(), b.model->params().values()) == 0.0);
  CHECK(test::max_abs_diff(a.model->params().values(), other.model->params().values()) > 0.0);
  // Weight and bias come from different streams (not the same leading values).
  CHECK(a.conv->weight().flat().at({0}) != a.conv->bias().at({0}));

  Fixture gl(c, 42, InitScheme::GlorotUniform);
  check_range(gl.conv->weight(), std::sqrt(6.0 / (4 * 27 + 6 * 27)));
  CHECK(ref::to_vec(gl.conv->bias()) == std::vector<double>(6, 0.0));
}

TEST_CASE("conv: parameters carry PyTorch names and layouts", "[conv]") {
  Case c{3, 1, 4, 6, {4, 4, 4}, {3, 2, 1}, {1, 1, 1}, {1, 0, 0}, true};
  Fixture f(c);
  const ParamStore& ps = f.model->params();
  CHECK(ps.info(ps.at("conv.weight")).shape == Shape{6, 4, 3, 2, 1});
  CHECK(ps.info(ps.at("conv.bias")).shape == Shape{6});
  Fixture nb(Case{1, 1, 4, 6, {9}, {4}, {1}, {0}, false});
  CHECK(nb.model->params().find("conv.bias") == -1);
  CHECK(nb.model->params().num_parameters() == 6 * 4 * 4);
}

TEST_CASE("conv: 'same' padding helper keeps the length at stride 1", "[conv]") {
  CHECK(same_padding(1) == 0);
  CHECK(same_padding(3) == 1);
  CHECK(same_padding(5) == 2);
  Conv1d conv(2, 3, 5, 1, same_padding(5));
  CHECK(conv.output_shape({4, 2, 37}) == Shape{4, 3, 37});
  Conv3d c3(2, 3, 3, 1, same_padding(3));
  CHECK(c3.output_shape({1, 2, 5, 6, 7}) == Shape{1, 3, 5, 6, 7});
  REQUIRE_THROWS_WITH(same_padding(4), Catch::Contains("odd kernel"));
}

TEST_CASE("conv: misuse throws Shape errors naming the layer and shapes", "[conv]") {
  Fixture f(Case{1, 1, 3, 30, {100}, {4}, {2}, {0}, true});
  Context ctx(Device::cpu());
  auto kind_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Runtime;
  };
  Tensor wrong_c = Tensor::zeros({2, 4, 100});
  REQUIRE_THROWS_WITH(f.conv->forward(ctx, wrong_c),
                      Catch::Contains("Conv1d 'conv'") && Catch::Contains("[2, 4, 100]") && Catch::Contains("C = 3"));
  CHECK(kind_of([&] { f.conv->forward(ctx, wrong_c); }) == ErrorKind::Shape);
  REQUIRE_THROWS_WITH(f.conv->forward(ctx, Tensor::zeros({2, 3, 10, 10})),
                      Catch::Contains("Conv1d") && Catch::Contains("[N, C, L]") && Catch::Contains("[2, 3, 10, 10]"));
  REQUIRE_THROWS_WITH(f.conv->output_shape({2, 3, 3}), Catch::Contains("Conv1d 'conv'") &&
                                                           Catch::Contains("[2, 3, 3]") &&
                                                           Catch::Contains("smaller than the kernel"));
  CHECK(kind_of([&] { f.conv->output_shape({2, 3, 3}); }) == ErrorKind::Shape);

  Conv3d c3(16, 32, 3, 1, 1);
  c3.set_name("conv2");
  REQUIRE_THROWS_WITH(c3.output_shape({8, 16, 32, 32}),
                      Catch::Contains("Conv3d 'conv2'") && Catch::Contains("[N, C, D, H, W]"));
  REQUIRE_THROWS_WITH(Conv3d(2, 3, {3, 3}, {1, 1, 1}, {0, 0, 0}), Catch::Contains("3 entries"));
  REQUIRE_THROWS_WITH(Conv1d(2, 3, 3, 0), Catch::Contains("must be positive"));
  REQUIRE_THROWS_WITH(Conv1d(0, 3, 3), Catch::Contains("channels must be positive"));

  // A gradient of the wrong shape.
  Tensor x = test::random_tensor({2, 3, 100}, 1);
  f.conv->forward(ctx, x);
  REQUIRE_THROWS_WITH(f.conv->backward(ctx, Tensor::zeros({2, 30, 48}), true),
                      Catch::Contains("[2, 30, 48]") && Catch::Contains("[2, 30, 49]"));
}

TEST_CASE("conv: oneDNN primitives are cached per input shape", "[conv]") {
  Case c{1, 4, 3, 8, {40}, {4}, {2}, {1}, true};
  Fixture f(c);
  Context ctx(Device::cpu());
  Tensor x = test::random_tensor(batch_shape(c), 2);
  Tensor dy = test::random_tensor(f.conv->output_shape(x.shape()), 3);
  CHECK(f.conv->cpu_primitive_builds() == 0);
  Tensor y1;
  for (int step = 0; step < 3; ++step) {
    Tensor y = f.conv->forward(ctx, x);
    f.conv->backward(ctx, dy, true);
    if (step == 0) y1 = y;
    CHECK(test::max_abs_diff(y, y1) == 0.0);  // bitwise reproducible
  }
  CHECK(f.conv->cpu_primitive_builds() == 1);
  Tensor x_small = x.narrow(0, 0, 3).contiguous();  // a last partial batch
  f.conv->forward(ctx, x_small);
  f.conv->forward(ctx, x);
  CHECK(f.conv->cpu_primitive_builds() == 2);
  // A non-contiguous input is made contiguous first.
  Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1);
  REQUIRE_FALSE(xt.is_contiguous());
  CHECK(test::max_abs_diff(f.conv->forward(ctx, xt), y1) == 0.0);
}

TEST_CASE("conv: one output position runs as GEMMs over the taps that meet the input", "[conv]") {
  // CosmoFlow's conv5-7 at 16^3-64^3 cubes: a 1^3 input, 3^3 kernel, padding 1.
  Case c{3, 4, 6, 5, {1, 1, 1}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, true};
  Fixture f(c);
  Context ctx(Device::cpu());
  Tensor x = test::random_tensor(batch_shape(c), 5);
  Tensor y = f.conv->forward(ctx, x);
  CHECK(f.conv->cpu_impl_info().find("dnnl_sgemm") != std::string::npos);
  CHECK(f.conv->cpu_primitive_builds() == 0);  // no oneDNN convolution built

  // The weights change between forward and backward (a finite-difference
  // check does this): backward reads them afresh, as the oneDNN path does.
  Tensor w = f.conv->weight();
  w.copy_from(test::random_tensor(w.shape(), 6));
  Tensor dy = test::random_tensor(y.shape(), 7);
  Tensor dx = f.conv->backward(ctx, dy, true);
  const auto g = ref::conv_geom(x.shape(), w.shape(), c.s, c.p);
  CHECK(max_rel(ref::to_vec(dx), ref::conv_backward_data(g, ref::to_vec(dy), ref::to_vec(w))) < 1e-5);

  // Gradients are overwritten: stale values in the non-centre taps are cleared.
  ParamStore& ps = f.model->params();
  ps.grad(ps.at("conv.weight")).fill_(3.f);
  f.conv->forward(ctx, x);
  f.conv->backward(ctx, dy, false);
  std::vector<double> dw, db;
  ref::conv_backward_weights(g, ref::to_vec(x), ref::to_vec(dy), dw, db);
  CHECK(max_rel(ref::to_vec(ps.grad(ps.at("conv.weight"))), dw) < 1e-5);
  int64_t nonzero = 0;
  for (double v : ref::to_vec(ps.grad(ps.at("conv.weight")))) nonzero += v != 0.0;
  CHECK(nonzero == c.O * c.C);  // the centre tap alone

  // A larger input of the same layer goes back to oneDNN; the reported
  // implementation follows the shape that ran last, cached or not.
  Tensor x3 = test::random_tensor(Shape{2, 6, 3, 3, 3}, 8);
  f.conv->forward(ctx, x3);
  CHECK(f.conv->cpu_primitive_builds() == 1);
  CHECK(f.conv->cpu_impl_info().find("dnnl_sgemm") == std::string::npos);
  f.conv->forward(ctx, x);
  CHECK(f.conv->cpu_impl_info().find("dnnl_sgemm") != std::string::npos);
  f.conv->forward(ctx, x3);
  CHECK(f.conv->cpu_primitive_builds() == 1);
  CHECK(f.conv->cpu_impl_info().find("dnnl_sgemm") == std::string::npos);
}
