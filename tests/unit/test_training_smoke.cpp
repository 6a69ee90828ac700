// End-to-end check of the engine core: a small 1-D CNN (conv -> max-pool ->
// ReLU blocks, flatten, FC) learns a synthetic regression on the CPU with
// Adam. The loss must fall at least 10x within a bounded number of steps.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/elementwise_ops.h"
#include "kernels/philox.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "optim/adam.h"

using namespace mrmf;

namespace {
// Each sample: 2 channels of length T; channel 0 is a sinusoid whose
// amplitude and frequency are the two labels (in [-1, 1]), channel 1 a
// ramp scaled by the amplitude. Smooth in time, so it is also learnable
// at reduced resolution.
void make_batch(int64_t N, int64_t T, uint64_t seed, uint64_t first, Tensor& x, Tensor& y) {
  x = Tensor::empty({N, 2, T});
  y = Tensor::empty({N, 2});
  for (int64_t n = 0; n < N; ++n) {
    const uint64_t id = first + static_cast<uint64_t>(n);
    const float a = 2.f * kernels::philox_uniform(seed, id, 0) - 1.f;
    const float f = 2.f * kernels::philox_uniform(seed, id, 1) - 1.f;
    const float phase = 6.2831853f * kernels::philox_uniform(seed, id, 2);
    const float cycles = 2.f + 1.5f * (f + 1.f);  // 2 .. 5 cycles over the window
    for (int64_t t = 0; t < T; ++t) {
      const float s = static_cast<float>(t) / static_cast<float>(T);
      x.at({n, 0, t}) = (1.5f + a) * std::sin(6.2831853f * cycles * s + phase);
      x.at({n, 1, t}) = a * s;
    }
    y.at({n, 0}) = a;
    y.at({n, 1}) = f;
  }
}
}  // namespace

TEST_CASE("training: a small 1-D CNN learns a synthetic regression", "[training]") {
  const int64_t T = 64, B = 32;
  Model model("smoke", Shape{2, T});
  auto& net = model.net();
  net.add("conv1", std::make_unique<Conv1d>(2, 8, 5), ParamGroup::Bottom);
  net.add("pool1", std::make_unique<MaxPool1d>(2), ParamGroup::Bottom);
  net.add("act1", std::make_unique<ReLU>(), ParamGroup::Bottom);
  net.add("conv2", std::make_unique<Conv1d>(8, 16, 5), ParamGroup::Bottom);
  net.add("pool2", std::make_unique<MaxPool1d>(2), ParamGroup::Bottom);
  net.add("act2", std::make_unique<ReLU>(), ParamGroup::Bottom);
  net.add("flatten", std::make_unique<Flatten>(), ParamGroup::Top);
  const int64_t flat = net.output_shape(Shape{1, 2, T})[1];
  REQUIRE(flat == 16 * 13);
  net.add("fc1", std::make_unique<Linear>(flat, 64), ParamGroup::Top);
  net.add("act3", std::make_unique<ReLU>(), ParamGroup::Top);
  net.add("fc2", std::make_unique<Linear>(64, 2), ParamGroup::Top);
  model.build(Device::cpu(), /*seed=*/3);

  Context ctx(Device::cpu());
  AdamOptions ao;
  Adam opt(model.params(), ao);
  Tensor vx, vy;
  make_batch(256, T, 11, 1'000'000, vx, vy);  // held-out set
  auto val_loss = [&] {
    ctx.set_training(false);
    Tensor p = model.forward(ctx, vx);
    ctx.set_training(true);
    return kernels::mse_loss(ctx.stream(), p, vy);
  };
  const float initial = val_loss();
  float final_loss = initial;
  for (int step = 0; step < 600; ++step) {
    Tensor x, y;
    make_batch(B, T, 11, static_cast<uint64_t>(step) * B, x, y);
    Tensor p = model.forward(ctx, x);
    Tensor g = Tensor::empty(p.shape());
    kernels::mse_grad(ctx.stream(), p, y, g);
    model.backward(ctx, g);
    opt.step(ctx.stream(), 3e-3f);
    if (step % 100 == 99) {
      final_loss = val_loss();
      if (final_loss * 10.f < initial) break;
    }
  }
  INFO("validation MSE " << initial << " -> " << final_loss);
  REQUIRE(std::isfinite(final_loss));
  REQUIRE(final_loss * 10.f < initial);
}
