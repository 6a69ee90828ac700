#include "fusion/step_benchmark.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/device.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/nvtx.h"
#include "fusion/trainer.h"
#include "kernels/elementwise_ops.h"
#include "kernels/philox.h"
#include "optim/adam.h"

namespace mrmf {

namespace {
using Clock = std::chrono::steady_clock;

// The digits after a workload prefix, or -1.
int64_t size_after(const std::string& key, const std::string& prefix) {
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < key.size(); ++i) {
    if (key[i] < '0' || key[i] > '9' || v > 100000) return -1;
    v = v * 10 + (key[i] - '0');
  }
  return v;
}

Tensor random(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = 2.f * kernels::philox_uniform(seed, 1, static_cast<uint64_t>(i)) - 1.f;
  return t;
}
}  // namespace

const char* step_workload_help() {
  return "ni<T>: Neuron Inverter, batch 512, T time bins (ni1600, ni800, ...); "
         "cf<S>: CosmoFlow (authors' variant), batch 8, S^3 cube (cf32, cf64, cf128, ...)";
}

std::vector<std::string> default_step_workloads() { return {"ni1600", "ni800", "cf32"}; }

StepWorkload step_workload(const std::string& key, int64_t batch) {
  MRMF_CHECK_KIND(Usage, batch >= 0, "bench: batch must be positive, got ", batch);
  StepWorkload w;
  w.key = key;
  if (const int64_t T = size_after(key, "ni"); T > 0) {
    w.spec.name = "neuron_inverter";
    w.spec.sample_shape = Shape{3, T};
    w.batch = batch ? batch : 512;
    w.label = "Neuron Inverter, batch " + std::to_string(w.batch) + ", T = " + std::to_string(T);
  } else if (const int64_t S = size_after(key, "cf"); S > 0) {
    w.spec.name = "cosmoflow";
    w.spec.variant = "mrmf";
    w.spec.sample_shape = Shape{4, S, S, S};
    w.batch = batch ? batch : 8;
    w.label = "CosmoFlow mrmf, batch " + std::to_string(w.batch) + ", " + std::to_string(S) + "^3";
  } else {
    MRMF_THROW(Usage, "bench: unknown workload '", key, "' (", step_workload_help(), ")");
  }
  w.spec = normalized(w.spec);
  {  // An input too small for the model fails here, naming the model's limit
     // (quietly: the timed build reports skipped pools and the like).
    const auto level = spdlog::get_level();
    spdlog::set_level(spdlog::level::warn);
    std::unique_ptr<Model> m;
    try {
      m = build_model(w.spec);
    } catch (...) {
      spdlog::set_level(level);
      throw;
    }
    spdlog::set_level(level);
    // A step would fail in BatchNorm (exit 1, after the build): said as the flag's error.
    const std::string bn = batchnorm_batch_problem(*m, w.batch);
    MRMF_CHECK_KIND(Usage, bn.empty(), "bench --batch ", w.batch, ": ", key, "'s BatchNorm ", bn,
                    " would have one value a channel in training; give at least 2");
  }
  return w;
}

StepTiming time_train_step(const StepWorkload& w, Device dev, const ContextOptions& copt, int warmup, int steps) {
  MRMF_CHECK_KIND(Usage, steps >= 1 && warmup >= 0, "bench: needs steps >= 1 and warmup >= 0, got ", steps, " and ",
                  warmup);
  if (dev.is_cuda()) {
    release_cached_memory();
    reset_cuda_peak(dev.index);
  }
  auto model = build_model(w.spec);
  model->build(dev, 1, default_init_scheme(w.spec));
  Context ctx(dev, copt);
  ctx.set_training(true);
  Adam opt(model->params());
  std::vector<int64_t> xs = w.spec.sample_shape.vec();
  xs.insert(xs.begin(), w.batch);
  const Tensor x = random(Shape(xs), 7).to(dev);
  const Tensor y = random(model->output_shape(w.batch), 8).to(dev);
  std::vector<double> ms;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = Clock::now();
    // A profiler can keep to the timed steps (ncu --nvtx --nvtx-include
    // "timed_step/"): warm-up includes the cuDNN algorithm search's kernels.
    MRMF_NVTX_RANGE(i < warmup ? "warmup_step" : "timed_step");
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
  StepTiming r;
  r.median_ms = ms[ms.size() / 2];
  r.min_ms = ms.front();
  r.max_ms = ms.back();
  r.samples_per_s = 1000.0 * double(w.batch) / r.median_ms;
  if (dev.is_cuda()) r.peak_gpu_gb = double(cuda_memory_stats(dev.index).peak_in_use) / 1e9;
  return r;
}

void run_step_benchmark(const StepBenchOptions& o) {
  const std::vector<std::string> keys = o.workloads.empty() ? default_step_workloads() : o.workloads;
  std::vector<StepWorkload> ws;
  for (const auto& k : keys) ws.push_back(step_workload(k, o.batch));  // every key checked before any work
  const Device dev = o.device;
  // Model-building info lines would break the JSON on stdout.
  if (o.json) spdlog::set_level(spdlog::level::warn);
  if (o.json)
    std::printf("{\"engine\": \"mrmf\", \"device\": \"%s\", \"tf32\": %d, \"cudnn_benchmark\": %d, \"threads\": %d, "
                "\"results\": [",
                dev.str().c_str(), int(o.copt.allow_tf32), int(o.copt.cudnn_benchmark), omp_get_max_threads());
  for (size_t k = 0; k < ws.size(); ++k) {
    const StepWorkload& w = ws[k];
    const StepTiming r = time_train_step(w, dev, o.copt, o.warmup, o.steps);
    if (o.json)
      std::printf("%s\n  {\"workload\": \"%s\", \"label\": \"%s\", \"batch\": %lld, \"steps\": %d, \"ms_per_step\": %.2f, "
                  "\"min_ms\": %.2f, \"max_ms\": %.2f, \"samples_per_s\": %.2f, \"peak_gpu_gb\": %.3f}",
                  k ? "," : "", w.key.c_str(), w.label.c_str(), static_cast<long long>(w.batch), o.steps, r.median_ms,
                  r.min_ms, r.max_ms, r.samples_per_s, r.peak_gpu_gb);
    else
      std::printf("%-40s %9.1f ms/step (min %.1f, max %.1f)  %8.1f samples/s  peak GPU %.2f GB\n", w.label.c_str(),
                  r.median_ms, r.min_ms, r.max_ms, r.samples_per_s, r.peak_gpu_gb);
    std::fflush(stdout);
  }
  if (o.json) std::printf("\n]}\n");
}

}  // namespace mrmf
