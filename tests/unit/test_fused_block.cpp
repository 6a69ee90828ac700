// Fused BN + activation + pooling: equal to the unfused BatchNorm ->
// LeakyReLU -> Pool sequence (outputs, input and parameter gradients, running
// statistics), finite differences, ReLU/maxpool commutation, misuse.
#include <catch2/catch.hpp>

#include "kernels/fused_epilogue_ops.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/fused_block.h"
#include "layers/pooling.h"
#include "support/finite_diff.h"
#include "support/reference_pool_bn.h"

using namespace mrmf;
using kernels::PoolKind;
using kernels::PoolParams;

namespace {
Shape sample_of(const Shape& in) {
  const std::vector<int64_t> d = in.vec();
  return Shape(std::vector<int64_t>(d.begin() + 1, d.end()));
}

std::unique_ptr<Module> make_pool(PoolKind kind, const PoolParams& p) {
  if (p.nd == 1)
    return kind == PoolKind::Max ? std::unique_ptr<Module>(std::make_unique<MaxPool1d>(p.kernel[0], p.stride[0], p.padding[0]))
                                 : std::make_unique<AvgPool1d>(p.kernel[0], p.stride[0], p.padding[0], p.count_include_pad);
  if (kind == PoolKind::Max) return std::make_unique<MaxPool3d>(p.kernel, p.stride, p.padding);
  return std::make_unique<AvgPool3d>(p.kernel, p.stride, p.padding, p.count_include_pad);
}

struct Pair {
  Model fused, plain;
  Pair(const BnActPoolOptions& o, const Shape& in) : fused("f", sample_of(in)), plain("p", sample_of(in)) {
    fused.net().add("blk", std::make_unique<BnActPool>(o), ParamGroup::Bottom);
    if (o.bn_channels > 0) {
      if (o.spatial_dims == 3)
        plain.net().add("blk", std::make_unique<BatchNorm3d>(o.bn_channels), ParamGroup::Bottom);
      else
        plain.net().add("blk", std::make_unique<BatchNorm1d>(o.bn_channels), ParamGroup::Bottom);
    }
    if (o.act) plain.net().add("act", std::make_unique<LeakyReLU>(o.slope), ParamGroup::Bottom);
    if (o.pool != PoolKind::None) plain.net().add("pool", make_pool(o.pool, o.pool_params), ParamGroup::Bottom);
    fused.build(Device::cpu(), 1);
    plain.build(Device::cpu(), 1);
    if (o.bn_channels > 0) {  // same non-trivial gamma / beta in both
      const Tensor g = test::random_tensor({o.bn_channels}, 31, -1.5f, 1.5f), b = test::random_tensor({o.bn_channels}, 32);
      for (Model* m : {&fused, &plain}) {
        m->params().value(m->params().at("blk.weight")).copy_from(g);
        m->params().value(m->params().at("blk.bias")).copy_from(b);
      }
    }
  }
};

BnActPoolOptions opts(int64_t bn, int nd, bool act, float slope, PoolKind pool, PoolParams pp) {
  BnActPoolOptions o;
  o.bn_channels = bn;
  o.spatial_dims = nd;
  o.act = act;
  o.slope = slope;
  o.pool = pool;
  o.pool_params = pp;
  return o;
}

struct FusedCase {
  const char* name;
  BnActPoolOptions o;
  Shape in;
};

std::vector<FusedCase> fused_cases() {
  return {
      {"bn relu maxpool1d(4)", opts(3, 1, true, 0.f, PoolKind::Max, PoolParams::make_1d(4)), Shape{4, 3, 18}},
      {"relu maxpool1d(4), no bn (Neuron Inverter)", opts(0, 1, true, 0.f, PoolKind::Max, PoolParams::make_1d(4)),
       Shape{2, 3, 16}},
      {"bn leaky avgpool3d k3 s2 p1 (LBANN)",
       opts(2, 3, true, 0.1f, PoolKind::Avg, PoolParams::make_3d({3, 3, 3}, {2, 2, 2}, {1, 1, 1})), Shape{2, 2, 5, 4, 6}},
      {"bn relu maxpool3d(2)", opts(2, 3, true, 0.f, PoolKind::Max, PoolParams::make_3d({2, 2, 2})), Shape{2, 2, 4, 4, 4}},
      {"leaky avgpool3d(2), no bn (CosmoFlow)", opts(0, 3, true, 0.3f, PoolKind::Avg, PoolParams::make_3d({2, 2, 2})),
       Shape{2, 2, 4, 4, 4}},
      {"bn relu, no pool", opts(3, 1, true, 0.f, PoolKind::None, {}), Shape{3, 3, 7}},
      {"bn only + avgpool1d", opts(3, 1, false, 0.f, PoolKind::Avg, PoolParams::make_1d(3, 2, 1, false)), Shape{3, 3, 9}},
  };
}
}  // namespace

TEST_CASE("fused block: equal to the unfused BN -> activation -> pool sequence", "[fused]") {
  for (const auto& c : fused_cases()) {
    INFO(c.name);
    Pair p(c.o, c.in);
    Context ctx(Device::cpu());
    for (int step = 0; step < 3; ++step) {
      // Step 2 runs with a context momentum override (BN re-calibration):
      // the fused block must honour it exactly as the plain BatchNorm does.
      ctx.set_bn_momentum_override(step == 2 ? 0.75 : -1.0);
      const Tensor x = test::random_tensor(c.in, 50 + step, -2.f, 2.f);
      const Tensor yf = p.fused.forward(ctx, x), yp = p.plain.forward(ctx, x);
      REQUIRE(yf.shape() == yp.shape());
      REQUIRE(test::max_abs_diff(yf, yp) <= 1e-6);
      const Tensor dy = test::random_tensor(yf.shape(), 60 + step);
      const Tensor dxf = p.fused.net().backward(ctx, dy, true), dxp = p.plain.net().backward(ctx, dy, true);
      REQUIRE(test::max_abs_diff(dxf, dxp) <= 1e-6);
      if (c.o.bn_channels > 0) {
        REQUIRE(test::max_abs_diff(p.fused.params().grads(), p.plain.params().grads()) <= 1e-5);
        REQUIRE(test::max_abs_diff(p.fused.params().buffers(), p.plain.params().buffers()) <= 1e-6);
      }
    }
    ctx.set_bn_momentum_override(-1.0);
    ctx.set_training(false);  // eval: running statistics
    const Tensor x = test::random_tensor(c.in, 70);
    REQUIRE(test::max_abs_diff(p.fused.forward(ctx, x), p.plain.forward(ctx, x)) <= 1e-6);
  }
}

TEST_CASE("fused block: backward matches finite differences", "[fused]") {
  for (const auto& c : fused_cases()) {
    INFO(c.name);
    Pair p(c.o, c.in);
    Context ctx(Device::cpu());
    test::GradCheckOptions opt;
    opt.eps = 5e-3;
    const auto rep = test::check_gradients(p.fused.net().child(0), ctx, test::random_tensor(c.in, 80, -2.f, 2.f), opt);
    INFO("worst: " << rep.worst);
    REQUIRE(rep.checked > 10);
    REQUIRE(rep.input_err < 3e-2);
    REQUIRE(rep.param_err < 3e-2);
  }
}

TEST_CASE("fused epilogue: ReLU(maxpool(x)) == maxpool(ReLU(x)) and the plain-loop reference", "[fused]") {
  const Shape in{3, 4, 21};
  const Tensor x = test::random_tensor(in, 5);
  const auto pp = PoolParams::make_1d(4);
  kernels::EpilogueSpec spec;
  spec.act = true;
  spec.pool = PoolKind::Max;
  spec.pool_params = pp;
  const Shape out = kernels::fused_epilogue_output_shape(in, spec, "t");
  Tensor y = Tensor::empty(out), arg = Tensor::empty(out, DType::I32);
  kernels::fused_epilogue_forward(cpu_stream(), x, Tensor(), Tensor(), Tensor(), Tensor(), y, arg, spec);
  const Tensor relu_of_pool = ref::leaky_relu(ref::pool_forward(x, true, pp), 0.0);
  const Tensor pool_of_relu = ref::pool_forward(ref::leaky_relu(x, 0.0), true, pp);
  REQUIRE(test::max_abs_diff(relu_of_pool, pool_of_relu) == 0.0);
  REQUIRE(test::max_abs_diff(y, relu_of_pool) == 0.0);

  // With BN statistics given: pool(act(bn(x))) vs the plain loops.
  const Tensor mean = test::random_tensor({4}, 6), var = test::random_tensor({4}, 7, 0.5f, 2.f);
  const Tensor gamma = test::random_tensor({4}, 8), beta = test::random_tensor({4}, 9);
  Tensor invstd = Tensor::empty({4});
  for (int c = 0; c < 4; ++c) invstd.data<float>()[c] = 1.f / std::sqrt(var.data<float>()[c] + 1e-5f);
  spec.slope = 0.2f;
  spec.pool = PoolKind::Avg;
  spec.pool_params = PoolParams::make_1d(3, 2, 1);
  const Shape out2 = kernels::fused_epilogue_output_shape(in, spec, "t");
  Tensor y2 = Tensor::empty(out2);
  kernels::fused_epilogue_forward(cpu_stream(), x, mean, invstd, gamma, beta, y2, Tensor(), spec);
  auto v = [](const Tensor& t) { return std::vector<double>(t.data<float>(), t.data<float>() + t.numel()); };
  const Tensor z = ref::bn_apply(x, v(mean), v(var), v(gamma), v(beta), 1e-5);
  REQUIRE(test::max_abs_diff(y2, ref::pool_forward(ref::leaky_relu(z, 0.2), false, spec.pool_params)) < 1e-5);
}

TEST_CASE("fused block: misuse names the layer and the shapes", "[fused]") {
  Model m("t", Shape{3, 3});
  auto& blk = m.net().add("blk", std::make_unique<BnActPool>(opts(3, 1, true, 0.f, PoolKind::Max, PoolParams::make_1d(4))),
                          ParamGroup::Bottom);
  m.build(Device::cpu(), 1);
  REQUIRE(m.params().find("blk.running_var") >= 0);
  REQUIRE(m.params().find("blk.num_batches_tracked") >= 0);
  Context ctx(Device::cpu());
  REQUIRE_THROWS_WITH(blk.forward(ctx, Tensor::full({2, 3, 3}, 0.f)),
                      Catch::Contains("BnActPool 'blk': input length 3 < kernel 4"));
  REQUIRE_THROWS_WITH(blk.forward(ctx, Tensor::full({2, 4, 8}, 0.f)),
                      Catch::Contains("BnActPool 'blk'") && Catch::Contains("C = 3") && Catch::Contains("[2, 4, 8]"));
  REQUIRE_THROWS_WITH(BnActPool(opts(0, 3, true, 0.f, PoolKind::Max, PoolParams::make_1d(2))),
                      Catch::Contains("BnActPool: 1-D pooling on 3-D input"));
}
