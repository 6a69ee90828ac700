// One full training step of the real models, on the CPU or a GPU: forward,
// MSE loss, backward, Adam -- the same sequence fusion/trainer.cpp runs per
// step, minus data loading and gradient communication. Counterpart of
// bench/torch_train_step.py (PyTorch); scripts/bench_vs_torch.sh runs both and
// prints the ratios.
//
//   bench_train_step [--workload NAME]... [--steps N] [--warmup W] [--device cpu|cuda[:i]]
//                    [--tf32 0|1] [--cudnn-benchmark 0|1] [--workspace-mb M] [--json]
//   workloads: ni1600 (Neuron Inverter, batch 512, T = 1600), ni800 (T = 800),
//              cf32 (CosmoFlow mrmf, batch 8, 32^3), cf64 (64^3), cf128 (128^3, the
//              production size; cf64/cf128 are not in the default set)
// On a GPU the peak device memory of the step (caching allocator's high-water
// mark, cuDNN workspaces included) is reported too. --tf32 and
// --cudnn-benchmark default to the trainer's defaults (runtime.allow_tf32,
// runtime.cudnn_benchmark: both on, like PyTorch with cudnn.benchmark).
//
// Reports the MEDIAN step time of N timed steps after W warm-up steps (the
// machine is shared and noisy; the median is robust to a few slow steps).
// Threads: OpenMP's (set OMP_NUM_THREADS=2 to match the PyTorch anchors).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/device.h"
#include "core/memory.h"
#include "kernels/elementwise_ops.h"
#include "kernels/philox.h"
#include "models/registry.h"
#include "optim/adam.h"

using namespace mrmf;
using Clock = std::chrono::steady_clock;

namespace {

struct Workload {
  std::string key, label;
  ModelSpec spec;
  int64_t batch;
};

Workload make(const std::string& key) {
  Workload w;
  w.key = key;
  if (key == "ni1600" || key == "ni800") {
    const int64_t T = key == "ni1600" ? 1600 : 800;
    w.spec.name = "neuron_inverter";
    w.spec.sample_shape = Shape{3, T};
    w.batch = 512;
    w.label = "Neuron Inverter, batch 512, T = " + std::to_string(T);
  } else if (key == "cf32" || key == "cf64" || key == "cf128") {
    const int64_t S = key == "cf32" ? 32 : key == "cf64" ? 64 : 128;
    w.spec.name = "cosmoflow";
    w.spec.variant = "mrmf";
    w.spec.sample_shape = Shape{4, S, S, S};
    w.batch = 8;
    w.label = "CosmoFlow mrmf, batch 8, " + std::to_string(S) + "^3";
  } else {
    std::fprintf(stderr, "unknown workload '%s' (ni1600, ni800, cf32, cf64, cf128)\n", key.c_str());
    std::exit(2);
  }
  return w;
}

Tensor random(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 2.f * kernels::philox_uniform(seed, 1, static_cast<uint64_t>(i)) - 1.f;
  return t;
}

struct Result {
  double median_ms, min_ms, max_ms, samples_per_s;
  double peak_gb = 0;  // GPU only
};

Result run(const Workload& w, const Device dev, const ContextOptions& copt, int warmup, int steps) {
  if (dev.is_cuda()) {
    release_cached_memory();
    reset_cuda_peak(dev.index);
  }
  auto model = build_model(w.spec);
  model->build(dev, 1, default_init_scheme(w.spec));
  Context ctx(dev, copt);
  ctx.set_training(true);
  Adam opt(model->params());
  std::vector<int64_t> xs{w.batch};
  for (int64_t d : w.spec.sample_shape.vec()) xs.push_back(d);
  const Tensor x = random(Shape(xs), 7).to(dev);
  const Tensor y = random(model->output_shape(w.batch), 8).to(dev);
  std::vector<double> ms;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = Clock::now();
    Tensor pred = model->forward(ctx, x);
    volatile float loss = kernels::mse_loss(ctx.stream(), pred, y);
    (void)loss;
    Tensor g = Tensor::empty(pred.shape(), DType::F32, dev);
    kernels::mse_grad(ctx.stream(), pred, y, g);
    model->backward(ctx, g);
    opt.step(ctx.stream(), 1e-4f);
    ctx.stream().synchronize();
    ctx.advance_step();
    // Peak memory of the steady state, like the PyTorch counterpart (warm-up
    // includes the one-time cuDNN algorithm search).
    if (dev.is_cuda() && i == warmup - 1) reset_cuda_peak(dev.index);
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  Result r;
  r.median_ms = ms[ms.size() / 2];
  r.min_ms = ms.front();
  r.max_ms = ms.back();
  r.samples_per_s = 1000.0 * double(w.batch) / r.median_ms;
  if (dev.is_cuda()) r.peak_gb = double(cuda_memory_stats(dev.index).peak_in_use) / 1e9;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> keys;
  int steps = 10, warmup = 3;
  bool json = false;
  std::string device = "cpu";
  ContextOptions copt;
  copt.allow_tf32 = copt.cudnn_benchmark = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--workload" && i + 1 < argc) keys.push_back(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--warmup" && i + 1 < argc) warmup = std::max(0, std::atoi(argv[++i]));
    else if (a == "--json") json = true;
    else if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--tf32" && i + 1 < argc) copt.allow_tf32 = std::atoi(argv[++i]) != 0;
    else if (a == "--cudnn-benchmark" && i + 1 < argc) copt.cudnn_benchmark = std::atoi(argv[++i]) != 0;
    else if (a == "--workspace-mb" && i + 1 < argc) copt.workspace_limit_bytes = size_t(std::atoll(argv[++i])) << 20;
    else {
      std::fprintf(stderr, "usage: %s [--workload ni1600|ni800|cf32|cf64|cf128]... [--steps N] [--warmup W] [--device cpu|cuda] [--tf32 0|1] "
                   "[--cudnn-benchmark 0|1] [--workspace-mb M] [--json]\n",
                   argv[0]);
      return 2;
    }
  }
  if (keys.empty()) keys = {"ni1600", "ni800", "cf32"};
  Device dev;
  try {
    dev = parse_device(device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_step: %s\n", e.what());
    return 2;
  }
  if (json) spdlog::set_level(spdlog::level::warn);  // model-building info lines would break the JSON on stdout
  if (json) std::printf("{\"engine\": \"mrmf\", \"device\": \"%s\", \"tf32\": %d, \"cudnn_benchmark\": %d, "
                          "\"threads\": %d, \"results\": [",
                          device.c_str(), int(copt.allow_tf32), int(copt.cudnn_benchmark), omp_get_max_threads());
  for (size_t k = 0; k < keys.size(); ++k) {
    const Workload w = make(keys[k]);
    const Result r = run(w, dev, copt, warmup, steps);
    if (json)
      std::printf("%s\n  {\"workload\": \"%s\", \"label\": \"%s\", \"batch\": %lld, \"steps\": %d, \"ms_per_step\": %.2f, "
                  "\"min_ms\": %.2f, \"max_ms\": %.2f, \"samples_per_s\": %.2f, \"peak_gpu_gb\": %.3f}",
                  k ? "," : "", w.key.c_str(), w.label.c_str(), static_cast<long long>(w.batch), steps, r.median_ms,
                  r.min_ms, r.max_ms, r.samples_per_s, r.peak_gb);
    else
      std::printf("%-40s %9.1f ms/step (min %.1f, max %.1f)  %8.1f samples/s  peak GPU %.2f GB\n", w.label.c_str(),
                  r.median_ms, r.min_ms, r.max_ms, r.samples_per_s, r.peak_gb);
    std::fflush(stdout);
  }
  if (json) std::printf("\n]}\n");
  return 0;
}
