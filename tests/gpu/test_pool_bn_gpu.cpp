// The pooling, batch-norm, fused-epilogue, dropout and reducer kernels and
// layers on Device::cuda(0) against the CPU backend for the same data.
// Compiles in every build (public API only); the GPU executable exits 77
// where no GPU exists.
#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/batchnorm_ops.h"
#include "kernels/dropout_ops.h"
#include "kernels/elementwise_ops.h"
#include "kernels/fused_epilogue_ops.h"
#include "kernels/pooling_ops.h"
#include "kernels/reduce_resolution_ops.h"
#include "layers/batchnorm.h"
#include "layers/dropout.h"
#include "layers/fused_block.h"
#include "layers/pooling.h"
#include "layers/reducer.h"
#include "support/finite_diff.h"

using namespace mrmf;
using kernels::PoolKind;
using kernels::PoolParams;

namespace {
Shape sample_of(const Shape& in) {
  const std::vector<int64_t> d = in.vec();
  return Shape(std::vector<int64_t>(d.begin() + 1, d.end()));
}

// Runs one module on the CPU and on the GPU (fresh models built from the same
// seed), forward + backward, a few steps; compares outputs, input gradients,
// parameter gradients and buffers. `cumulative`: BN momentum 1/(step + 1)
// through the context override, as the BN re-calibration runs it.
void compare_layer(const std::function<std::unique_ptr<Module>()>& make, const Shape& in, double tol, int steps = 2,
                   bool cumulative = false) {
  Model mc("c", sample_of(in)), mg("g", sample_of(in));
  Module& lc = mc.net().add("l", make(), ParamGroup::Bottom);
  Module& lg = mg.net().add("l", make(), ParamGroup::Bottom);
  mc.build(Device::cpu(), 3);
  mg.build(Device::cuda(0), 3);
  Context cc(Device::cpu(), ContextOptions{true, size_t(1) << 26, 11});
  Context cg(Device::cuda(0), ContextOptions{true, size_t(1) << 26, 11});
  for (int step = 0; step < steps; ++step) {
    INFO(lc.type() << " " << in.str() << " step " << step);
    cc.set_step(step);
    cg.set_step(step);
    cc.set_bn_momentum_override(cumulative ? 1.0 / (step + 1) : -1.0);
    cg.set_bn_momentum_override(cumulative ? 1.0 / (step + 1) : -1.0);
    const Tensor x = test::random_tensor(in, 10 + step, -2.f, 2.f);
    const Tensor yc = lc.forward(cc, x);
    const Tensor yg = lg.forward(cg, x.to(cg.device(), cg.stream()));
    const Tensor dy = test::random_tensor(yc.shape(), 20 + step);
    const Tensor dxc = lc.backward(cc, dy, true);
    const Tensor dxg = lg.backward(cg, dy.to(cg.device(), cg.stream()), true);
    cg.stream().synchronize();
    // <=: a tolerance of 0 asks for bitwise equality (dropout).
    REQUIRE(test::max_rel_diff(yg, yc) <= tol);
    REQUIRE(test::max_rel_diff(dxg, dxc) <= tol);
    if (mc.params().num_param_elements() > 0) REQUIRE(test::max_rel_diff(mg.params().grads(), mc.params().grads()) <= tol);
    if (mc.params().buffers().defined() && mc.params().buffers().numel() > 0)
      REQUIRE(test::max_rel_diff(mg.params().buffers(), mc.params().buffers()) <= tol);
  }
  cc.set_training(false);
  cg.set_training(false);
  const Tensor x = test::random_tensor(in, 99);
  const Tensor yg = lg.forward(cg, x.to(cg.device(), cg.stream()));
  cg.stream().synchronize();
  REQUIRE(test::max_rel_diff(yg, lc.forward(cc, x)) <= tol);
}

BnActPoolOptions fused(int64_t bn, int nd, float slope, PoolKind pool, PoolParams pp) {
  BnActPoolOptions o;
  o.bn_channels = bn;
  o.spatial_dims = nd;
  o.slope = slope;
  o.pool = pool;
  o.pool_params = pp;
  return o;
}
}  // namespace

TEST_CASE("gpu pooling layers match the CPU", "[gpu][pool]") {
  compare_layer([] { return std::make_unique<MaxPool1d>(4); }, {8, 30, 1597}, 1e-6);
  compare_layer([] { return std::make_unique<AvgPool1d>(3, 2, 1); }, {4, 5, 101}, 1e-6);
  compare_layer([] { return std::make_unique<MaxPool3d>(2); }, {2, 4, 8, 10, 12}, 1e-6);
  compare_layer([] { return std::make_unique<AvgPool3d>(3, 2, 1); }, {2, 3, 9, 8, 7}, 1e-6);
  compare_layer([] { return std::make_unique<AvgPool3d>(std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{2, 2, 2},
                                                        std::array<int64_t, 3>{1, 1, 1}, false); },
                {1, 2, 7, 7, 7}, 1e-6);
}

TEST_CASE("gpu batch norm (cuDNN) matches the CPU kernels", "[gpu][batchnorm]") {
  compare_layer([] { return std::make_unique<BatchNorm1d>(16); }, {32, 16}, 1e-4, 3);
  compare_layer([] { return std::make_unique<BatchNorm1d>(6); }, {8, 6, 97}, 1e-4, 3);
  compare_layer([] { return std::make_unique<BatchNorm3d>(4); }, {2, 4, 6, 8, 10}, 1e-4, 3);
}

TEST_CASE("gpu batch-norm kernels match the CPU kernels", "[gpu][batchnorm]") {
  const Shape s{4, 5, 3001};
  Context cg(Device::cuda(0));
  Stream& gs = cg.stream();
  auto dev = [&](const Tensor& t) { return t.to(cg.device(), gs); };
  const Tensor x = test::random_tensor(s, 1, -1.f, 4.f), dy = test::random_tensor(s, 2);
  const Tensor gamma = test::random_tensor({5}, 3, 0.5f, 1.5f), beta = test::random_tensor({5}, 4);
  std::vector<Tensor> c = {Tensor::empty({5}), Tensor::empty({5}), Tensor::full({5}, 0.f), Tensor::full({5}, 1.f),
                           Tensor::empty(s), Tensor::empty(s), Tensor::empty({5}), Tensor::empty({5})};
  std::vector<Tensor> g;
  for (const Tensor& t : c) g.push_back(dev(t));
  kernels::batchnorm_stats(cpu_stream(), x, c[0], c[1], c[2], c[3], 0.1, 1e-5);
  kernels::batchnorm_apply(cpu_stream(), x, c[0], c[1], gamma, beta, c[4]);
  kernels::batchnorm_backward(cpu_stream(), x, dy, c[0], c[1], gamma, true, c[5], c[6], c[7]);
  const Tensor gx = dev(x), gdy = dev(dy), gg = dev(gamma), gb = dev(beta);
  kernels::batchnorm_stats(gs, gx, g[0], g[1], g[2], g[3], 0.1, 1e-5);
  kernels::batchnorm_apply(gs, gx, g[0], g[1], gg, gb, g[4]);
  kernels::batchnorm_backward(gs, gx, gdy, g[0], g[1], gg, true, g[5], g[6], g[7]);
  gs.synchronize();
  for (size_t i = 0; i < c.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(test::max_rel_diff(g[i], c[i]) < 1e-4);
  }
}

TEST_CASE("gpu fused block matches the CPU", "[gpu][fused]") {
  compare_layer([] { return std::make_unique<BnActPool>(fused(8, 1, 0.f, PoolKind::Max, PoolParams::make_1d(4))); },
                {16, 8, 403}, 1e-4);
  compare_layer([] { return std::make_unique<BnActPool>(fused(0, 1, 0.f, PoolKind::Max, PoolParams::make_1d(4))); },
                {16, 8, 403}, 1e-6);
  compare_layer([] {
    return std::make_unique<BnActPool>(fused(4, 3, 0.01f, PoolKind::Avg, PoolParams::make_3d({3, 3, 3}, {2, 2, 2}, {1, 1, 1})));
  }, {2, 4, 9, 10, 11}, 1e-4);
  compare_layer([] { return std::make_unique<BnActPool>(fused(4, 3, 0.f, PoolKind::None, {})); }, {2, 4, 6, 6, 6}, 1e-4);
}

TEST_CASE("gpu batch norm and fused block honour the BN re-calibration momentum override", "[gpu][batchnorm]") {
  // CPU side checked against plain loops in test_batchnorm / test_fused_block;
  // here cuDNN's exponentialAverageFactor and the GPU kernels must follow it.
  compare_layer([] { return std::make_unique<BatchNorm3d>(4, 1e-3, 0.01); }, {2, 4, 6, 8, 10}, 1e-4, 3, true);
  compare_layer([] { return std::make_unique<BatchNorm1d>(6, 1e-5, 0.01); }, {8, 6, 97}, 1e-4, 3, true);
  compare_layer([] { return std::make_unique<BnActPool>(fused(4, 3, 0.f, PoolKind::Avg, PoolParams::make_3d({2, 2, 2}))); },
                {2, 4, 6, 6, 6}, 1e-4, 3, true);
}

TEST_CASE("gpu dropout draws the CPU's mask", "[gpu][dropout]") {
  const Tensor x = test::random_tensor({3, 1000, 7}, 5);
  Context cg(Device::cuda(0));
  Tensor yc = Tensor::empty(x.shape()), yg = Tensor::empty(x.shape(), DType::F32, cg.device());
  kernels::dropout_apply(cpu_stream(), x, yc, 77, 12345, 0.4f);
  kernels::dropout_apply(cg.stream(), x.to(cg.device(), cg.stream()), yg, 77, 12345, 0.4f);
  const Tensor back = yg.to(Device::cpu(), cg.stream());
  cg.stream().synchronize();
  REQUIRE(std::memcmp(back.raw_data(), yc.raw_data(), yc.nbytes()) == 0);
  compare_layer([] { return std::make_unique<Dropout>(0.3f); }, {4, 64, 33}, 0.0);
}

TEST_CASE("gpu resolution reducer matches the CPU", "[gpu][reducer]") {
  compare_layer([] { return std::make_unique<ResolutionReducer>(std::vector<int64_t>{2}); }, {8, 30, 1597}, 1e-6);
  compare_layer([] { return std::make_unique<ResolutionReducer>(std::vector<int64_t>{2, 2, 2}); }, {2, 4, 8, 8, 8}, 1e-6);
  compare_layer([] { return std::make_unique<ResolutionReducer>(std::vector<int64_t>{1, 1, 4}); }, {2, 4, 4, 4, 16}, 1e-6);
}

// The GPU segmented sum splits a segment into 8192-element chunks once it is
// longer than one chunk (two passes); the layer tests above stay below that.
// Long segments, few channels -- CosmoFlow's input BN and first conv bias.
TEST_CASE("gpu reductions over many chunks match the CPU", "[gpu][reduce]") {
  Context cg(Device::cuda(0));
  Stream& gs = cg.stream();
  const Tensor dy = test::random_tensor({3, 4, 50021}, 41);  // 150063 values per channel: 19 chunks
  Tensor dbc = Tensor::empty({4}), dbg = Tensor::empty({4}, DType::F32, cg.device());
  kernels::bias_grad(cpu_stream(), dy, dbc);
  kernels::bias_grad(gs, dy.to(cg.device(), gs), dbg);
  const Tensor x = test::random_tensor({2, 3, 32, 32, 33}, 42, -1.f, 3.f);  // 67584 values per channel
  Tensor mc = Tensor::empty({3}), ic = Tensor::empty({3});
  Tensor mg = Tensor::empty({3}, DType::F32, cg.device()), ig = Tensor::empty({3}, DType::F32, cg.device());
  kernels::batchnorm_stats(cpu_stream(), x, mc, ic, Tensor(), Tensor(), 0.1, 1e-5);
  kernels::batchnorm_stats(gs, x.to(cg.device(), gs), mg, ig, Tensor(), Tensor(), 0.1, 1e-5);
  const Tensor dbg_h = dbg.to(Device::cpu(), gs), mg_h = mg.to(Device::cpu(), gs), ig_h = ig.to(Device::cpu(), gs);
  gs.synchronize();
  CHECK(test::max_rel_diff(dbg_h, dbc) < 1e-5);
  CHECK(test::max_rel_diff(mg_h, mc) < 1e-5);
  CHECK(test::max_rel_diff(ig_h, ic) < 1e-5);
  // Deterministic: the same call gives the same bits.
  Tensor dbg2 = Tensor::empty({4}, DType::F32, cg.device());
  kernels::bias_grad(gs, dy.to(cg.device(), gs), dbg2);
  const Tensor dbg2_h = dbg2.to(Device::cpu(), gs);
  gs.synchronize();
  CHECK(test::max_abs_diff(dbg2_h, dbg_h) == 0.0);
}
