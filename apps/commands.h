// Subcommands of the `mrmf` command. Each lives in apps/cmd_<name>.cpp and
// adds itself to the CLI11 app; its callback runs the work and returns the
// process exit code (0 ok, 1 runtime failure, 2 usage/config error).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace mrmf::cli {

// The function a subcommand runs after parsing. Exceptions are mapped to
// exit codes by main(): mrmf::Error of kind Usage/Config -> 2, others -> 1.
using Action = std::function<int()>;

// Each add_* registers its subcommand and stores its action in `action`
// (called only if that subcommand was selected).
void add_info_command(CLI::App& app, Action& action);
void add_datagen_command(CLI::App& app, Action& action);
void add_downsample_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
void add_experiment_command(CLI::App& app, Action& action);
void add_eval_command(CLI::App& app, Action& action);
void add_predict_command(CLI::App& app, Action& action);

// Common options shared by subcommands that run models.
struct RuntimeFlags {
  std::string device;  // --device cpu|cuda|cuda:N|auto
  int threads = 0;     // --threads (OpenMP); 0 = runtime default
};
void add_runtime_flags(CLI::App& sub, RuntimeFlags& flags);
// Applies --threads and selects the device (never aborts without a GPU).
void apply_runtime_flags(const RuntimeFlags& flags);

}  // namespace mrmf::cli
