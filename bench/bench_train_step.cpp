// One full training step of the real models, on the CPU or a GPU (the
// measurement itself: fusion/step_benchmark.h, also behind `mrmf bench`).
// Counterpart of bench/torch_train_step.py (PyTorch); scripts/bench_vs_torch.sh
// runs both and prints the ratios.
//
//   bench_train_step [--workload NAME]... [--batch B] [--steps N] [--warmup W]
//                    [--device cpu|cuda[:i]] [--tf32 0|1] [--cudnn-benchmark 0|1]
//                    [--workspace-mb M] [--json]
//   workloads: ni<T> (Neuron Inverter, batch 512, e.g. ni1600, ni800), cf<S>
//              (CosmoFlow mrmf, batch 8, e.g. cf32, cf64, cf128); default ni1600 ni800 cf32
// --tf32 and --cudnn-benchmark default to the trainer's defaults
// (runtime.allow_tf32, runtime.cudnn_benchmark: both on, like PyTorch with
// cudnn.benchmark). Threads: OpenMP's (OMP_NUM_THREADS=2 matches the PyTorch anchors).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "fusion/step_benchmark.h"

int main(int argc, char** argv) {
  mrmf::StepBenchOptions o;
  std::string device = "cpu";
  o.copt.allow_tf32 = o.copt.cudnn_benchmark = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--workload" && i + 1 < argc) o.workloads.push_back(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) o.batch = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) o.steps = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) o.warmup = std::atoi(argv[++i]);
    else if (a == "--json") o.json = true;
    else if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--tf32" && i + 1 < argc) o.copt.allow_tf32 = std::atoi(argv[++i]) != 0;
    else if (a == "--cudnn-benchmark" && i + 1 < argc) o.copt.cudnn_benchmark = std::atoi(argv[++i]) != 0;
    else if (a == "--workspace-mb" && i + 1 < argc) o.copt.workspace_limit_bytes = size_t(std::atoll(argv[++i])) << 20;
    else {
      std::fprintf(stderr, "usage: %s [--workload NAME]... [--batch B] [--steps N] [--warmup W] [--device cpu|cuda] "
                   "[--tf32 0|1] [--cudnn-benchmark 0|1] [--workspace-mb M] [--json]\n  workloads: %s\n",
                   argv[0], mrmf::step_workload_help());
      return 2;
    }
  }
  try {
    o.device = mrmf::parse_device(device);
    mrmf::run_step_benchmark(o);
  } catch (const mrmf::Error& e) {
    std::fprintf(stderr, "bench_train_step: %s\n", e.message().c_str());
    return e.kind() == mrmf::ErrorKind::Usage || e.kind() == mrmf::ErrorKind::Config ? 2 : 1;
  }
  return 0;
}
