// Optimizer and Linear benchmark (not asserted).
//   * the fused Adam step over a 3 M-element flat buffer (Neuron Inverter size)
//     against a copy moving the same bytes: Adam reads p, g, m, v and writes
//     p, m, v (28 B/element), so the reference copies 14 B/element (read +
//     write = 28 B). The ratio shows how close the update is to streaming speed.
//   * Linear 4320 -> 512 forward + backward (incl. dX) at batch 512, GFLOP/s.
//
//   bench_optim [iterations=20] [cpu|cuda]   (default: cuda where available)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "kernels/philox.h"
#include "layers/linear.h"
#include "optim/adam.h"

using namespace mrmf;
using Clock = std::chrono::steady_clock;

namespace {

Tensor random(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 2.f * kernels::philox_uniform(seed, 1, static_cast<uint64_t>(i)) - 1.f;
  return t;
}

// Best-of-`iters` milliseconds of fn() (synchronized): least disturbed by other load.
double best_ms(int iters, Stream& s, const std::function<void()>& fn) {
  fn();  // warm-up
  s.synchronize();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    fn();
    s.synchronize();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

void bench_adam(Device dev, int iters) {
  // Neuron Inverter: ~3 M parameters, conv bottom + fully connected top.
  ParamStore store;
  store.add_param("bottom.weight", {1000000}, ParamGroup::Bottom);
  store.add_param("top.weight", {2000000}, ParamGroup::Top);
  store.finalize(dev);
  Context ctx(dev);
  store.grads().copy_from(random({store.num_param_elements()}, 1), ctx.stream());
  Adam adam(store);
  const int64_t n = store.num_param_elements();
  const double ms = best_ms(iters, ctx.stream(), [&] { adam.step(ctx, 1e-4f); });

  // Reference: a copy of 14 B/element (3.5 floats), i.e. the same traffic.
  const int64_t m = n * 7 / 2;
  Tensor src = Tensor::zeros({m}, DType::F32, dev, ctx.stream()), dst = Tensor::zeros({m}, DType::F32, dev, ctx.stream());
  std::function<void()> copy;
  if (dev.is_cpu()) {
    // Threaded like the update (OpenMP), so the comparison is fair.
    copy = [&] {
      const float* s = src.data<float>();
      float* d = dst.data<float>();
      constexpr int64_t kChunk = 1 << 16;
#pragma omp parallel for schedule(static)
      for (int64_t c = 0; c < (m + kChunk - 1) / kChunk; ++c)
        std::memcpy(d + c * kChunk, s + c * kChunk, sizeof(float) * size_t(std::min(kChunk, m - c * kChunk)));
    };
  } else {
    copy = [&] { dst.copy_from(src, ctx.stream()); };
  }
  const double cms = best_ms(iters, ctx.stream(), copy);
  const double bytes = 28.0 * double(n);
  std::printf("Adam step, %lld elements (%s): %.3f ms, %.1f GB/s | copy of the same bytes: %.3f ms, %.1f GB/s | "
              "ratio adam/copy %.2f\n",
              static_cast<long long>(n), dev.str().c_str(), ms, bytes / ms * 1e-6, cms, bytes / cms * 1e-6, ms / cms);
}

void bench_linear(Device dev, int iters) {
  const int64_t N = 512, in = 4320, out = 512;
  Model model("bench", Shape{in});
  Linear& fc = model.net().add("fc", std::make_unique<Linear>(in, out), ParamGroup::Top);
  model.build(dev, 1);
  Context ctx(dev);
  Tensor x = random({N, in}, 2).to(dev, ctx.stream()), dy = random({N, out}, 3).to(dev, ctx.stream());
  const double flop = 2.0 * double(N) * double(in) * double(out);
  const double f_ms = best_ms(iters, ctx.stream(), [&] { fc.forward(ctx, x); });
  const double fb_ms = best_ms(iters, ctx.stream(), [&] {
    fc.forward(ctx, x);
    fc.backward(ctx, dy, true);
  });
  std::printf("Linear %lld -> %lld, batch %lld (%s): fwd %.3f ms %.1f GFLOP/s | fwd+bwd %.3f ms %.1f GFLOP/s\n",
              static_cast<long long>(in), static_cast<long long>(out), static_cast<long long>(N), dev.str().c_str(),
              f_ms, flop / f_ms * 1e-6, fb_ms, 3 * flop / fb_ms * 1e-6);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
    Device dev = cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
    if (argc > 2) dev = parse_device(argv[2]);
    set_current_device(dev);
    bench_adam(dev, iters);
    bench_linear(dev, iters);
    release_cached_memory();  // before static destruction, while the driver is alive
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_optim: %s\n", e.what());
    return 1;
  }
  return 0;
}
