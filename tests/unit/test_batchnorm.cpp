// Batch norm: kernels vs plain loops, layer gradients vs finite differences,
// running statistics (unbiased variance) over several steps, eval mode,
// determinism of the reductions, misuse messages.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/batchnorm_ops.h"
#include "layers/batchnorm.h"
#include "support/finite_diff.h"
#include "support/reference_pool_bn.h"

using namespace mrmf;

namespace {
std::vector<double> vec_of(const Tensor& t) {
  Tensor c = t.to(Device::cpu());
  return std::vector<double>(c.data<float>(), c.data<float>() + c.numel());
}
Shape sample_of(const Shape& in) {
  const std::vector<int64_t> d = in.vec();
  return Shape(std::vector<int64_t>(d.begin() + 1, d.end()));
}
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}
}  // namespace

TEST_CASE("batchnorm kernels: stats, apply and backward match the closed form", "[batchnorm]") {
  // Rows of 10 and of 3 (lane blocks straddle rows), flat [N, F], 3^3 rows, rows
  // longer than a 4096-element reduction chunk (chunks start inside rows),
  // and a flat input large enough for several threads (whose element ranges
  // start inside a row of F channels).
  for (const Shape& s :
       {Shape{4, 3, 10}, Shape{6, 2, 3}, Shape{8, 5}, Shape{2, 2, 3, 3, 3}, Shape{3, 2, 4101}, Shape{4100, 5}}) {
    INFO(s.str());
    const int64_t C = s[1];
    const Tensor x = test::random_tensor(s, 5, -2.f, 3.f);
    const Tensor gamma = test::random_tensor({C}, 6, 0.5f, 1.5f), beta = test::random_tensor({C}, 7);
    Tensor mean = Tensor::empty({C}), invstd = Tensor::empty({C}), y = Tensor::empty(s);
    kernels::batchnorm_stats(cpu_stream(), x, mean, invstd, Tensor(), Tensor(), 0.1, 1e-5);
    kernels::batchnorm_apply(cpu_stream(), x, mean, invstd, gamma, beta, y);
    std::vector<double> rm, rv;
    ref::bn_stats(x, rm, rv);
    REQUIRE(max_diff(vec_of(mean), rm) < 1e-5);
    std::vector<double> ris;
    for (double v : rv) ris.push_back(1.0 / std::sqrt(v + 1e-5));
    REQUIRE(max_diff(vec_of(invstd), ris) < 1e-4);
    REQUIRE(test::max_abs_diff(y, ref::bn_apply(x, rm, rv, vec_of(gamma), vec_of(beta), 1e-5)) < 1e-5);

    const Tensor dy = test::random_tensor(s, 8);
    Tensor dx = Tensor::empty(s), dg = Tensor::empty({C}), db = Tensor::empty({C});
    kernels::batchnorm_backward(cpu_stream(), x, dy, mean, invstd, gamma, true, dx, dg, db);
    std::vector<double> rdg, rdb;
    const Tensor rdx = ref::bn_backward(x, dy, vec_of(gamma), 1e-5, rdg, rdb);
    REQUIRE(max_diff(vec_of(dg), rdg) < 1e-4);
    REQUIRE(max_diff(vec_of(db), rdb) < 1e-5);
    REQUIRE(test::max_abs_diff(dx, rdx) < 1e-5);

    // Eval-mode backward (fixed statistics): dx = gamma * invstd * dy.
    kernels::batchnorm_backward(cpu_stream(), x, dy, mean, invstd, gamma, false, dx, dg, db);
    const int64_t inner = x.numel() / (s[0] * C);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = (i / inner) % C;
      REQUIRE(dx.data<float>()[i] ==
              Approx(gamma.data<float>()[c] * invstd.data<float>()[c] * dy.data<float>()[i]).margin(1e-6));
    }
  }
}

namespace {
struct BnModel {
  Model m;
  BatchNorm* bn;
  BnModel(std::unique_ptr<BatchNorm> layer, const Shape& sample) : m("t", sample) {
    bn = &m.net().add("bn", std::move(layer), ParamGroup::Bottom);
    m.build(Device::cpu(), 1);
  }
  Tensor value(const char* n) { return m.params().value(m.params().at(std::string("bn.") + n)); }
};
}  // namespace

TEST_CASE("batchnorm layers: state_dict names, shapes and initial values", "[batchnorm]") {
  BnModel t(std::make_unique<BatchNorm3d>(4), Shape{4, 2, 2, 2});
  REQUIRE(t.bn->type() == "BatchNorm3d");
  REQUIRE(t.m.params().num_parameters() == 8);
  REQUIRE(t.value("weight").shape() == Shape{4});
  REQUIRE(t.value("running_var").data<float>()[3] == 1.f);
  REQUIRE(t.value("running_mean").data<float>()[0] == 0.f);
  REQUIRE(t.value("bias").data<float>()[2] == 0.f);
  REQUIRE(t.value("weight").data<float>()[1] == 1.f);
  REQUIRE(t.value("num_batches_tracked").numel() == 1);
  REQUIRE(t.value("num_batches_tracked").data<float>()[0] == 0.f);
}

TEST_CASE("batchnorm layers: backward matches finite differences", "[batchnorm]") {
  struct Case {
    std::function<std::unique_ptr<BatchNorm>()> make;
    Shape in;
  };
  const std::vector<Case> cases = {
      {[] { return std::make_unique<BatchNorm1d>(3); }, Shape{4, 3, 6}},
      {[] { return std::make_unique<BatchNorm1d>(5); }, Shape{6, 5}},
      {[] { return std::make_unique<BatchNorm3d>(2); }, Shape{2, 2, 2, 3, 3}},
  };
  for (const auto& c : cases) {
    INFO(c.in.str());
    BnModel t(c.make(), sample_of(c.in));
    // Non-trivial gamma/beta so that their gradients and dx are exercised.
    t.value("weight").copy_from(test::random_tensor({c.in[1]}, 3, 0.5f, 2.f));
    t.value("bias").copy_from(test::random_tensor({c.in[1]}, 4));
    Context ctx(Device::cpu());
    test::GradCheckOptions opt;
    opt.eps = 1e-2;
    const auto rep = test::check_gradients(*t.bn, ctx, test::random_tensor(c.in, 9, -2.f, 2.f), opt);
    INFO("worst: " << rep.worst);
    REQUIRE(rep.checked > 10);
    REQUIRE(rep.input_err < 2e-2);
    REQUIRE(rep.param_err < 2e-2);
  }
}

TEST_CASE("batchnorm layers: running statistics after several steps (unbiased variance)", "[batchnorm]") {
  BnModel t(std::make_unique<BatchNorm1d>(3), Shape{3, 4});
  Context ctx(Device::cpu());
  std::vector<double> hm(3, 0.0), hv(3, 1.0);
  for (int step = 0; step < 4; ++step) {
    const Tensor x = test::random_tensor({5, 3, 4}, 100 + step, -1.f + step, 2.f + 2 * step);
    t.bn->forward(ctx, x);
    std::vector<double> m, v;
    ref::bn_stats(x, m, v);
    const double M = 5 * 4;
    for (size_t c = 0; c < 3; ++c) {
      hm[c] = 0.9 * hm[c] + 0.1 * m[c];
      hv[c] = 0.9 * hv[c] + 0.1 * v[c] * M / (M - 1);
    }
  }
  REQUIRE(max_diff(vec_of(t.value("running_mean")), hm) < 1e-5);
  REQUIRE(max_diff(vec_of(t.value("running_var")), hv) < 1e-5);
  REQUIRE(t.value("num_batches_tracked").data<float>()[0] == 4.f);

  // Eval mode: normalizes with the running statistics and changes nothing.
  ctx.set_training(false);
  const Tensor x = test::random_tensor({2, 3, 4}, 200);
  const Tensor y = t.bn->forward(ctx, x);
  const Tensor y_ref = ref::bn_apply(x, hm, hv, {1, 1, 1}, {0, 0, 0}, 1e-5);
  REQUIRE(test::max_abs_diff(y, y_ref) < 1e-5);
  REQUIRE(max_diff(vec_of(t.value("running_mean")), hm) < 1e-5);
  REQUIRE(t.value("num_batches_tracked").data<float>()[0] == 4.f);
  REQUIRE_THROWS_WITH(t.bn->backward(ctx, y, true), Catch::Contains("backward without a training-mode forward"));
  // A single value per channel is fine in eval mode.
  REQUIRE_NOTHROW(t.bn->forward(ctx, test::random_tensor({1, 3, 1}, 1)));
}

TEST_CASE("batchnorm layers: the context's momentum override (1/k: cumulative average) replaces the layer's own",
          "[batchnorm]") {
  // BN re-calibration (fusion/bn_recalibrate.h) relies on this: with
  // momentum 1/k at the k-th batch the running statistics are the plain mean
  // of the batch statistics, whatever the layer's momentum (here Keras-like 0.01).
  BnModel t(std::make_unique<BatchNorm1d>(3, 1e-5, 0.01), Shape{3, 4});
  Context ctx(Device::cpu());
  REQUIRE(ctx.bn_momentum(0.01) == 0.01);
  std::vector<double> sm(3, 0.0), sv(3, 0.0);
  const int n = 4;
  for (int k = 1; k <= n; ++k) {
    const Tensor x = test::random_tensor({5, 3, 4}, 300 + k, -1.f + k, 2.f + 2 * k);
    ctx.set_bn_momentum_override(1.0 / k);
    t.bn->forward(ctx, x);
    std::vector<double> m, v;
    ref::bn_stats(x, m, v);
    for (size_t c = 0; c < 3; ++c) {
      sm[c] += m[c] / n;
      sv[c] += v[c] * 20.0 / 19.0 / n;
    }
  }
  ctx.set_bn_momentum_override(-1);
  REQUIRE(ctx.bn_momentum(0.01) == 0.01);
  REQUIRE(max_diff(vec_of(t.value("running_mean")), sm) < 1e-5);
  REQUIRE(max_diff(vec_of(t.value("running_var")), sv) < 1e-5);
  // Without the override the layer's momentum applies again.
  const Tensor x = test::random_tensor({5, 3, 4}, 400);
  t.bn->forward(ctx, x);
  std::vector<double> m, v;
  ref::bn_stats(x, m, v);
  for (size_t c = 0; c < 3; ++c) sm[c] = 0.99 * sm[c] + 0.01 * m[c];
  REQUIRE(max_diff(vec_of(t.value("running_mean")), sm) < 1e-5);
}

TEST_CASE("batchnorm kernels: reductions are identical with 1 and 2 threads", "[batchnorm]") {
  const Shape s{8, 4, 4101};  // several 4096-element chunks per channel; the threads' ranges split a row
  const Tensor x = test::random_tensor(s, 41, -3.f, 5.f), dy = test::random_tensor(s, 42);
  const Tensor gamma = test::random_tensor({4}, 43, 0.5f, 1.5f);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<Tensor> r = {Tensor::empty({4}), Tensor::empty({4}), Tensor::full({4}, 0.f), Tensor::full({4}, 1.f),
                             Tensor::empty(s), Tensor::empty({4}), Tensor::empty({4})};
    kernels::batchnorm_stats(cpu_stream(), x, r[0], r[1], r[2], r[3], 0.1, 1e-5);
    kernels::batchnorm_backward(cpu_stream(), x, dy, r[0], r[1], gamma, true, r[4], r[5], r[6]);
    return r;
  };
  const int before = omp_get_max_threads();
  const auto a = run(1), b = run(2);
  omp_set_num_threads(before);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes()) == 0);
}

TEST_CASE("batchnorm layers: misuse names the layer and the shapes", "[batchnorm]") {
  BnModel t(std::make_unique<BatchNorm1d>(4), Shape{4});
  Context ctx(Device::cpu());
  try {
    t.bn->forward(ctx, Tensor::full({2, 3, 5}, 0.f));
    FAIL("expected a Shape error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Shape);
    REQUIRE_THAT(e.what(), Catch::Contains("BatchNorm1d 'bn'") && Catch::Contains("C = 4") &&
                               Catch::Contains("[2, 3, 5]"));
  }
  REQUIRE_THROWS_WITH(t.bn->forward(ctx, Tensor::full({1, 4}, 0.f)),
                      Catch::Contains("more than 1 value per channel") && Catch::Contains("[1, 4]"));
  REQUIRE_THROWS_WITH(t.bn->forward(ctx, Tensor::full({2, 4, 1, 1, 1}, 0.f)), Catch::Contains("[N, F] or [N, C, L]"));
  REQUIRE_THROWS_AS(BatchNorm1d(0), Error);
}
