// One full training step of a real model, timed: forward, MSE loss, backward,
// Adam -- the sequence fusion/trainer.cpp runs per step, minus data loading
// and gradient communication. Shared by `mrmf bench` and
// bench/bench_train_step (whose PyTorch counterpart is
// bench/torch_train_step.py; scripts/bench_vs_torch.sh prints the ratios).
#pragma once

#include <string>
#include <vector>

#include "core/device.h"
#include "layers/context.h"
#include "models/registry.h"

namespace mrmf {

struct StepWorkload {
  std::string key, label;  // "ni1600", "Neuron Inverter, batch 512, T = 1600"
  ModelSpec spec;
  int64_t batch = 0;
};

// Workload keys: ni<T> (Neuron Inverter, batch 512, T time bins, e.g. ni1600,
// ni800) and cf<S> (CosmoFlow, the MRMF authors' variant, batch 8, S^3 cube,
// e.g. cf32, cf128). batch > 0 overrides the default batch. Throws a Usage
// error naming the key otherwise.
StepWorkload step_workload(const std::string& key, int64_t batch = 0);
// The default set and the help text listing the keys.
std::vector<std::string> default_step_workloads();  // ni1600, ni800, cf32
const char* step_workload_help();

struct StepTiming {
  double median_ms = 0, min_ms = 0, max_ms = 0, samples_per_s = 0;
  double peak_gpu_gb = 0;  // the caching allocator's high-water mark of the steady state (GPU only)
};

// Builds the model on `dev`, runs `warmup` untimed and `steps` timed steps on
// random data and reports the MEDIAN step time (shared machines are noisy;
// the median is robust to a few slow steps).
StepTiming time_train_step(const StepWorkload& w, Device dev, const ContextOptions& copt, int warmup, int steps);

// The benchmark's report: one line per workload, or one JSON document.
struct StepBenchOptions {
  std::vector<std::string> workloads;  // empty: default_step_workloads()
  int64_t batch = 0;                   // 0: each workload's default
  int warmup = 3, steps = 10;
  bool json = false;
  Device device = Device::cpu();
  ContextOptions copt;
};
void run_step_benchmark(const StepBenchOptions& o);

}  // namespace mrmf
