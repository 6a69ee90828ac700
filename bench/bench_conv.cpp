// CPU convolution benchmark: forward + backward of the Neuron Inverter Conv1d
// layers (batch 512) and a CosmoFlow-style Conv3d stack (batch 8, 32^3 down
// to 2^3), through the layer API (oneDNN backend). Prints ms and GFLOP/s.
//
//   bench_conv [iterations=3] [--impl]     (threads: OMP_NUM_THREADS)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/philox.h"
#include "layers/conv.h"

using namespace mrmf;
using Clock = std::chrono::steady_clock;

namespace {

Tensor random(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 2.f * kernels::philox_uniform(seed, 1, static_cast<uint64_t>(i)) - 1.f;
  return t;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void bench(const char* label, std::unique_ptr<Conv> c, const Shape& x_shape, int iters, bool impl) {
  std::vector<int64_t> sample = x_shape.vec();
  sample.erase(sample.begin());
  Model model("bench", Shape(sample));
  Conv& conv = model.net().add("conv", std::move(c), ParamGroup::Bottom);
  model.build(Device::cpu(), 1);
  Context ctx(Device::cpu());
  Tensor x = random(x_shape, 2);
  const Shape ys = conv.output_shape(x_shape);
  Tensor dy = random(ys, 3);
  // Multiply-adds of the forward pass; backward data + weights cost twice that.
  const auto& sp = conv.spec();
  const double fwd_flop = 2.0 * double(ys.numel()) * double(sp.in_channels * sp.kernel_volume());

  conv.forward(ctx, x);  // warm-up: builds and caches the primitives
  conv.backward(ctx, dy, true);
  double f_ms = 1e30, b_ms = 1e30;  // best of `iters`: least disturbed by other load
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    conv.forward(ctx, x);
    f_ms = std::min(f_ms, ms_since(t0));
    t0 = Clock::now();
    conv.backward(ctx, dy, true);
    b_ms = std::min(b_ms, ms_since(t0));
  }
  std::printf("%-34s %-18s fwd %8.2f ms %7.1f GFLOP/s | bwd %8.2f ms %7.1f GFLOP/s | total %8.2f ms\n", label,
              x_shape.str().c_str(), f_ms, fwd_flop / f_ms * 1e-6, b_ms, 2 * fwd_flop / b_ms * 1e-6, f_ms + b_ms);
  if (impl) std::printf("    %s\n", conv.cpu_impl_info().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 3;
  bool impl = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--impl"))
      impl = true;
    else
      iters = std::max(1, std::atoi(argv[i]));
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("mrmf bench_conv: oneDNN CPU backend, OMP_NUM_THREADS=%s, best of %d\n", omp ? omp : "(unset)", iters);
  try {
    std::printf("Neuron Inverter (Conv1d k=4, batch 512)\n");
    bench("conv1d 3->30", std::make_unique<Conv1d>(3, 30, 4), {512, 3, 1600}, iters, impl);
    bench("conv1d 30->90", std::make_unique<Conv1d>(30, 90, 4), {512, 30, 800}, iters, impl);
    bench("conv1d 90->180", std::make_unique<Conv1d>(90, 180, 4), {512, 90, 400}, iters, impl);
    std::printf("CosmoFlow stack (Conv3d k=3 pad 1, batch 8)\n");
    int64_t c_in = 4, side = 32;
    for (int64_t c_out : {16, 32, 64, 128, 256}) {
      const std::string label = "conv3d " + std::to_string(c_in) + "->" + std::to_string(c_out);
      bench(label.c_str(), std::make_unique<Conv3d>(c_in, c_out, 3, 1, 1), {8, c_in, side, side, side}, iters, impl);
      c_in = c_out;
      side /= 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_conv: %s\n", e.what());
    return 1;
  }
  return 0;
}
