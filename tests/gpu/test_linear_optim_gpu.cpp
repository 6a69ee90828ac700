// Linear (cuBLAS) and the fused optimizer kernels on CUDA against the CPU
// results for the same parameters and data. Runs only where a GPU exists (the
// executable exits 77 otherwise); compiles in CPU-only builds through the public API.
#include <catch2/catch.hpp>

#include <cmath>

#include "layers/linear.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "support/finite_diff.h"

using namespace mrmf;

namespace {

// Same architecture and seed on two devices: initialization runs on the host,
// so the parameters are bitwise equal.
struct BuiltLinear {
  std::unique_ptr<Model> model;
  Linear* fc = nullptr;
};

BuiltLinear build_linear(Device dev, int64_t in, int64_t out, bool bias) {
  BuiltLinear b;
  b.model = std::make_unique<Model>("t", Shape{in});
  b.fc = &b.model->net().add("fc", std::make_unique<Linear>(in, out, bias), ParamGroup::Top);
  b.model->build(dev, 5);
  return b;
}

// Two parameters in two groups, with padding; values and grads from a seed.
std::unique_ptr<ParamStore> make_store(Device dev) {
  auto s = std::make_unique<ParamStore>();
  s->add_param("conv.weight", {7, 5}, ParamGroup::Bottom);
  s->add_param("fc.weight", {3, 11}, ParamGroup::Top);
  s->add_param("fc.bias", {3}, ParamGroup::Top);
  s->finalize(dev);
  return s;
}

void fill_store(ParamStore& s, Stream& stream, uint64_t seed, bool grads_only) {
  for (const auto& p : s.entries()) {
    const ParamId id = s.at(p.name);
    if (!grads_only) s.value(id).copy_from(test::random_tensor(p.shape, seed + uint64_t(p.offset)), stream);
    s.grad(id).copy_from(test::random_tensor(p.shape, seed + 1000 + uint64_t(p.offset)), stream);
  }
}

}  // namespace

TEST_CASE("gpu linear: forward and backward match the CPU", "[gpu][linear]") {
  for (bool bias : {true, false}) {
    const int64_t N = 33, in = 130, out = 17;
    auto cpu = build_linear(Device::cpu(), in, out, bias);
    auto gpu = build_linear(Device::cuda(0), in, out, bias);
    Context cctx(Device::cpu()), gctx(Device::cuda(0));
    Tensor x = test::random_tensor({N, in}, 1), dy = test::random_tensor({N, out}, 2);
    Tensor yc = cpu.fc->forward(cctx, x);
    Tensor yg = gpu.fc->forward(gctx, x.to(gctx.device(), gctx.stream()));
    Tensor dxc = cpu.fc->backward(cctx, dy, true);
    Tensor dxg = gpu.fc->backward(gctx, dy.to(gctx.device(), gctx.stream()), true);
    gctx.stream().synchronize();
    REQUIRE(test::max_rel_diff(yg, yc) < 1e-5);
    REQUIRE(test::max_rel_diff(dxg, dxc) < 1e-5);
    REQUIRE(test::max_rel_diff(gpu.model->params().grads(), cpu.model->params().grads()) < 1e-5);
  }
}

TEST_CASE("gpu linear: finite differences on the device", "[gpu][linear]") {
  auto gpu = build_linear(Device::cuda(0), 9, 4, true);
  Context ctx(Device::cuda(0));
  const auto rep = test::check_gradients(gpu.model->net(), ctx, test::random_tensor({3, 9}, 4));
  INFO(rep.worst);
  REQUIRE(rep.input_err < 1e-2);
  REQUIRE(rep.param_err < 1e-2);
}

TEST_CASE("gpu optim: SGD and Adam steps match the CPU", "[gpu][optim]") {
  Context gctx(Device::cuda(0));
  for (int kind = 0; kind < 4; ++kind) {
    INFO("kind " << kind);
    auto sc = make_store(Device::cpu());
    auto sg = make_store(Device::cuda(0));
    fill_store(*sc, cpu_stream(), 3, false);
    fill_store(*sg, gctx.stream(), 3, false);
    std::unique_ptr<Optimizer> oc, og;
    if (kind < 2) {
      SgdOptions o;
      o.momentum = 0.9f;
      o.nesterov = kind == 1;
      o.weight_decay = 1e-2f;
      oc = std::make_unique<SGD>(*sc, o);
      og = std::make_unique<SGD>(*sg, o);
    } else {
      AdamOptions o;
      o.weight_decay = 0.05f;
      o.decoupled = kind == 3;
      oc = std::make_unique<Adam>(*sc, o);
      og = std::make_unique<Adam>(*sg, o);
    }
    oc->freeze(ParamGroup::Bottom);
    og->freeze(ParamGroup::Bottom);
    for (int step = 0; step < 4; ++step) {
      if (step == 2) {  // bottom joins late: two launches with different step numbers
        oc->unfreeze(ParamGroup::Bottom);
        og->unfreeze(ParamGroup::Bottom);
      }
      fill_store(*sc, cpu_stream(), 10 + uint64_t(step), true);
      fill_store(*sg, gctx.stream(), 10 + uint64_t(step), true);
      oc->step(cpu_stream(), 1e-2f);
      og->step(gctx, 1e-2f);
    }
    gctx.stream().synchronize();
    REQUIRE(test::max_abs_diff(sg->values(), sc->values()) < 1e-6);
    for (size_t k = 0; k < oc->state_tensors().size(); ++k)
      REQUIRE(test::max_rel_diff(og->state_tensors()[k].second, oc->state_tensors()[k].second) < 1e-5);
  }
}
