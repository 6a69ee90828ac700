// `mrmf bench`: times one full training step (forward, loss, backward, Adam)
// of the real models on the CPU or a GPU -- the compute column of an epoch
// without data loading or communication, comparable with
// bench/torch_train_step.py. Data-path and kernel benchmarks are the
// programs in bench/ (bench_data, bench_kernels, ...).
#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/device.h"
#include "core/log.h"
#include "fusion/step_benchmark.h"

namespace mrmf::cli {

void add_bench_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("bench", "Time a training step of the real models (median of N steps)");
  struct Flags {
    StepBenchOptions o;
    RuntimeFlags rt;
    bool tf32 = true, cudnn_benchmark = true;
    int64_t workspace_mb = 4096;
  };
  auto f = std::make_shared<Flags>();
  sub->add_option("--workload", f->o.workloads, std::string("workloads to time (default ni1600 ni800 cf32); ") +
                                                     step_workload_help());
  sub->add_option("--batch", f->o.batch, "batch size for every workload (default: 512 for ni, 8 for cf)")
      ->check(at_least(1));
  sub->add_option("--steps", f->o.steps, "timed steps (default 10)")->check(between(1, 1000000));
  sub->add_option("--warmup", f->o.warmup, "untimed steps first (default 3)")->check(between(0, 1000000));
  sub->add_flag("--json", f->o.json, "one JSON document on stdout instead of a line per workload");
  sub->add_option("--tf32", f->tf32, "GPU: allow TF32 convolutions and GEMMs (default 1)")->check(boolean_word());
  sub->add_option("--cudnn-benchmark", f->cudnn_benchmark, "GPU: time cuDNN's algorithms once (default 1)")
      ->check(boolean_word());
  sub->add_option("--workspace-mb", f->workspace_mb, "GPU: cuDNN workspace cap (default 4096)")
      ->check(at_least(0));
  add_runtime_flags(*sub, f->rt);
  sub->callback([&action, f] {
    action = [f] {
      if (f->o.json) log::to_stderr();  // stdout is the JSON document
      apply_runtime_flags(f->rt);
      StepBenchOptions o = f->o;
      RuntimeOptions ro;
      ro.device = f->rt.device;
      o.device = select_device(ro);
      o.copt.allow_tf32 = f->tf32;
      o.copt.cudnn_benchmark = f->cudnn_benchmark;
      o.copt.workspace_limit_bytes = static_cast<size_t>(f->workspace_mb) << 20;
      run_step_benchmark(o);
      return 0;
    };
  });
}

}  // namespace mrmf::cli
