// CUDA (cuDNN) convolutions against the CPU (oneDNN) results for the same
// parameters and data. Runs only where a GPU exists (the executable exits 77
// otherwise); compiles in CPU-only builds through the public API.
#include <catch2/catch.hpp>

#include "layers/conv.h"
#include "support/finite_diff.h"

using namespace mrmf;

namespace {

struct Built {
  std::unique_ptr<Model> model;
  Conv* conv = nullptr;
};

// The same architecture and seed on two devices: initialization runs on the
// host, so the parameters are bitwise equal.
Built build(Device dev, std::unique_ptr<Conv> c, const Shape& sample) {
  Built b;
  b.model = std::make_unique<Model>("t", sample);
  b.conv = &b.model->net().add("conv", std::move(c), ParamGroup::Bottom);
  b.model->build(dev, 9);
  return b;
}

struct Result {
  Tensor y, dx, grads;
};

Result run(Built& b, Context& ctx, const Tensor& x_cpu, const Tensor& dy_cpu) {
  Result r;
  Tensor x = x_cpu.to(ctx.device(), ctx.stream());
  Tensor y = b.conv->forward(ctx, x);
  Tensor dx = b.conv->backward(ctx, dy_cpu.to(ctx.device(), ctx.stream()), true);
  r.y = y.to(Device::cpu(), ctx.stream());
  r.dx = dx.to(Device::cpu(), ctx.stream());
  r.grads = b.model->params().grads().to(Device::cpu(), ctx.stream());
  ctx.stream().synchronize();
  return r;
}

// How the GPU context picks its algorithms: deterministic or not, cuDNN's
// heuristics or timed search (cudnnFind), strict FP32 or TF32 tensor cores.
struct Mode {
  bool deterministic = false, benchmark = false, tf32 = false;
};
const Mode kModes[] = {{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false},
                       {false, true, true}};

template <class Make>
void compare(Make make, const Shape& sample, int64_t batch, Mode mode) {
  INFO("deterministic " << mode.deterministic << ", benchmark " << mode.benchmark << ", tf32 " << mode.tf32);
  const bool deterministic = mode.deterministic;
  // TF32 keeps 10 mantissa bits of each product (FP32 accumulation).
  const double tol = mode.tf32 ? 1e-2 : 1e-4;
  std::vector<int64_t> xd = sample.vec();
  xd.insert(xd.begin(), batch);
  const Shape xs(xd);
  Built cpu = build(Device::cpu(), make(), sample);
  Built gpu = build(Device::cuda(0), make(), sample);
  Context cctx(Device::cpu());
  ContextOptions opt;
  opt.deterministic = deterministic;
  opt.cudnn_benchmark = mode.benchmark;
  opt.allow_tf32 = mode.tf32;
  Context gctx(Device::cuda(0), opt);
  Tensor x = test::random_tensor(xs, 21);
  Tensor dy = test::random_tensor(cpu.conv->output_shape(xs), 22);
  Result a = run(cpu, cctx, x, dy), b = run(gpu, gctx, x, dy);
  CHECK(test::max_rel_diff(b.y, a.y) < tol);
  CHECK(test::max_rel_diff(b.dx, a.dx) < tol);
  CHECK(test::max_rel_diff(b.grads, a.grads) < tol);
  if (deterministic) {  // a second step reproduces every bit
    Result c = run(gpu, gctx, x, dy);
    CHECK(test::max_abs_diff(c.y, b.y) == 0.0);
    CHECK(test::max_abs_diff(c.dx, b.dx) == 0.0);
    CHECK(test::max_abs_diff(c.grads, b.grads) == 0.0);
  }
}

}  // namespace

TEST_CASE("conv gpu: Conv1d matches the CPU", "[gpu][conv]") {
  for (const Mode& m : kModes) {
    compare([] { return std::make_unique<Conv1d>(3, 30, 4, 1, 0); }, Shape{3, 200}, 8, m);
    compare([] { return std::make_unique<Conv1d>(30, 90, 4, 2, 1); }, Shape{30, 101}, 4, m);
    compare([] { return std::make_unique<Conv1d>(5, 7, 3, 2, 0, false); }, Shape{5, 16}, 3, m);
  }
}

TEST_CASE("conv gpu: Conv3d matches the CPU", "[gpu][conv]") {
  for (const Mode& m : kModes) {
    compare([] { return std::make_unique<Conv3d>(4, 16, 3, 1, 1); }, Shape{4, 16, 16, 16}, 2, m);
    compare([] { return std::make_unique<Conv3d>(16, 32, 3, 2, 1, false); }, Shape{16, 9, 8, 7}, 2, m);
  }
}

TEST_CASE("conv gpu: a tiny workspace limit still runs", "[gpu][conv]") {
  Built cpu = build(Device::cpu(), std::make_unique<Conv3d>(8, 8, 3, 1, 1), Shape{8, 8, 8, 8});
  Built gpu = build(Device::cuda(0), std::make_unique<Conv3d>(8, 8, 3, 1, 1), Shape{8, 8, 8, 8});
  Context cctx(Device::cpu());
  ContextOptions opt;
  opt.workspace_limit_bytes = 0;
  opt.cudnn_benchmark = true;  // the timed search too must respect the cap
  Context gctx(Device::cuda(0), opt);
  Tensor x = test::random_tensor({2, 8, 8, 8, 8}, 1), dy = test::random_tensor({2, 8, 8, 8, 8}, 2);
  Result a = run(cpu, cctx, x, dy), b = run(gpu, gctx, x, dy);
  CHECK(test::max_rel_diff(b.y, a.y) < 1e-4);
  CHECK(test::max_rel_diff(b.grads, a.grads) < 1e-4);
}
