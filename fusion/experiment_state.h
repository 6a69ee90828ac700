// What an experiment keeps between processes, so that `mrmf experiment
// --resume` continues one that was stopped (a Slurm time limit, a node
// failure) instead of starting over:
//
//   <out>/experiment_state.json   {"version", "identity", "runs": [MethodRun...]}
//
// rewritten atomically after every finished run (method x seed). A run is
// the unit of resumption: a finished run is kept with its whole record (the
// per-epoch histories the report's breakdown is built from); one that was
// interrupted is run again from its start, because its stages hand models to
// each other in memory.
//
// The identity is everything that decides what a run computes and how its
// time compares with the others': the effective run configuration, the
// experiment's stop rules, ladder, target and fusion options, a fingerprint
// of the training and validation data, and the launch: ranks, device kind and
// OpenMP threads (runtime.device and runtime.threads are compared as these
// effective values, so a --device or --threads flag counts too). Seeds and
// methods are not part of it: adding a seed or a method to an experiment is
// what --resume is for.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusion/experiment_config.h"
#include "fusion/orchestrator.h"

namespace mrmf {

// The identity as YAML text (comparable with config_differences).
struct LaunchInfo {
  int ranks = 1;
  std::string device_kind;  // "cpu" or "cuda"
  int threads = 1;          // OpenMP threads per rank
};
std::string experiment_identity(const ExperimentConfig& cfg, const LaunchInfo& launch);

// The identity keys that differ, "key: old -> new".
std::vector<std::string> identity_differences(const std::string& saved, const std::string& current);

struct ExperimentState {
  std::string identity;
  std::string config_text;  // the configuration as the report shows it (first command's file and overrides)
  // Every (method, seed) the experiment is to run, in order: a resumed one
  // runs the rest of this plan and whatever its own command adds.
  std::vector<std::pair<std::string, uint64_t>> plan;
  // The runs of the plan that have started: their folders were emptied and
  // hold this experiment's stage checkpoints. --resume continues only these
  // inside their stages; any other run starts clean, since its folder may
  // hold what another experiment (one that --force replaced) left there.
  // States written before this was recorded read it as the whole plan.
  std::vector<std::pair<std::string, uint64_t>> started;
  std::vector<MethodRun> runs;  // finished runs, in the order they finished
  // The run of `method` with `seed`, or nullptr.
  const MethodRun* find(const std::string& method, uint64_t seed) const;
};

inline constexpr const char* kExperimentStateFile = "experiment_state.json";

nlohmann::json state_to_json(const ExperimentState& s);
ExperimentState state_from_json(const nlohmann::json& j);  // throws nlohmann / YAML errors on damage

// Written to a temporary file in `dir`, flushed and renamed over the old one:
// a process killed while writing leaves the previous state whole.
void save_experiment_state(const std::string& dir, const ExperimentState& state);
// Throws a Config error naming the file when it is not a state this version wrote.
ExperimentState load_experiment_state(const std::string& path);

// Records <-> JSON: the state, what the concurrent method's groups exchange
// and (without the per-epoch histories) summary.json's "runs". A NaN loss is
// stored as null and read back as NaN.
nlohmann::json stage_to_json(const StageResult& s, bool with_history = true);
StageResult stage_from_json(const nlohmann::json& j);
nlohmann::json method_run_to_json(const MethodRun& r, bool with_history = true);
MethodRun method_run_from_json(const nlohmann::json& j);

}  // namespace mrmf
