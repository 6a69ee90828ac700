#include "fusion/experiment_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "data/h5file.h"
#include "fusion/config.h"
#include "fusion/trainer.h"

namespace mrmf {
namespace fs = std::filesystem;

namespace {
constexpr int kStateVersion = 2;  // 2: plan and config_text

YAML::Node stop_node(const StopRule& s) {
  YAML::Node n;
  n["threshold"] = s.threshold;
  n["patience"] = s.patience;
  n["max_epochs"] = s.max_epochs;
  // Only when set: experiments recorded before these keys counted keep their identity.
  if (s.min_epochs > 0) n["min_epochs"] = s.min_epochs;
  if (s.reference != "previous") n["reference"] = s.reference;
  return n;
}

// JSON has no NaN: a diverged loss is written as null (nlohmann's dump) and
// must read back as NaN, not throw a type error.
double number_or_nan(const nlohmann::json& v) {
  return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
}
}  // namespace

std::string experiment_identity(const ExperimentConfig& cfg, const LaunchInfo& launch) {
  YAML::Node root;
  // The base run configuration with every override applied, as the runs see
  // it (their per-stage seed, reduction and stop keys are derived from the
  // experiment section below).
  const RunConfig rc = parse_run_config(cfg.run_yaml, cfg.run_sets, "experiment run configuration");
  root["run"] = YAML::Load(rc.text);
  // Compared as the launch's effective values below (flags count too).
  root["run"]["runtime"].remove("device");
  root["run"]["runtime"].remove("threads");
  // The experiment's stop rules set it per stage (below); the base's value is
  // not used. Removed so that experiments recorded before the key keep their identity.
  root["run"]["stop"].remove("plateau_reference");
  // Keys added later, compared only where set: recorded experiments keep their identity.
  if (rc.schedule.warmup_steps == 0) root["run"]["schedule"].remove("warmup_steps");
  // The data behind the paths: a data set regenerated or replaced under the
  // same name must not be mixed with the runs measured on the old one.
  MRMF_CHECK_KIND(Config, !rc.data.path.empty() || !rc.data.train_files.empty(),
                  "config key 'data.path': no dataset given");
  root["data"]["train"] = data::data_fingerprint(data_spec(rc, data::Split::Train));
  root["data"]["val"] = data::data_fingerprint(data_spec(rc, data::Split::Val));
  // A rung that reads other files (resolution_overrides naming data.*)
  // too: its data regenerated under the same name were mixed into a
  // resumed experiment. Only where a rung names data, so that recorded
  // experiments keep their identity.
  for (const auto& [rung, rung_sets] : cfg.resolution_overrides) {
    const bool names_data = std::any_of(rung_sets.begin(), rung_sets.end(), [](const std::string& a) {
      return a.rfind("data.path=", 0) == 0 || a.rfind("data.train_files=", 0) == 0 ||
             a.rfind("data.val_files=", 0) == 0 || a.rfind("data.format=", 0) == 0;
    });
    if (!names_data) continue;
    std::vector<std::string> sets = cfg.run_sets;
    sets.insert(sets.end(), rung_sets.begin(), rung_sets.end());
    const RunConfig rr = parse_run_config(cfg.run_yaml, sets, "experiment run configuration");
    root["data"]["rung " + rung]["train"] = data::data_fingerprint(data_spec(rr, data::Split::Train));
    root["data"]["rung " + rung]["val"] = data::data_fingerprint(data_spec(rr, data::Split::Val));
  }
  YAML::Node e = root["experiment"];
  e["target_val_loss"] = cfg.target_val_loss;
  e["max_epochs"] = cfg.max_epochs;
  // Lists as one flow-style string each (the form saved states hold).
  std::vector<std::string> rungs;
  for (const auto& r : cfg.ladder) rungs.push_back("[" + resolution_key(r) + "]");
  e["ladder"] = fmt::format("[{}]", fmt::join(rungs, ", "));
  e["one_fusion_coarse"] = resolution_key(cfg.ladder_for("mrt").front());
  for (size_t st = 0; st + 1 < cfg.ladder.size(); ++st) {
    const StageStops s = cfg.stops_for_stage(st);
    YAML::Node n;
    n["coarse_stop"] = stop_node(s.coarse);
    n["dense_stop"] = stop_node(s.dense);
    e["stages"].push_back(n);
  }
  for (const auto& [res, sets] : cfg.resolution_overrides)
    e["resolution_overrides"][res] = fmt::format("[{}]", fmt::join(sets, ", "));
  if (!cfg.finetune_overrides.empty())  // only where set: recorded experiments keep their identity
    e["finetune_overrides"] = fmt::format("[{}]", fmt::join(cfg.finetune_overrides, ", "));
  e["optimizer_at_fusion"] = cfg.optimizer_at_fusion;
  if (cfg.mrt_top != "fresh") e["mrt_top"] = cfg.mrt_top;  // only where set, as finetune_overrides
  e["shared_init"] = cfg.shared_init;
  e["bn_recalibration_batches"] = cfg.bn_recalibration_batches;
  e["concurrent_times"] = fmt::format("[{}]", fmt::join(cfg.concurrent_times, ", "));
  e["probe_steps"] = cfg.probe_steps;
  // Only when on: experiments recorded before the key existed keep their identity.
  if (cfg.concurrent_overtime) e["concurrent_overtime"] = true;
  // Times measured on another number of ranks or another device do not
  // belong in the same table.
  root["launch"]["ranks"] = launch.ranks;
  root["launch"]["device"] = launch.device_kind;
  root["launch"]["threads"] = launch.threads;
  return YAML::Dump(root);
}

std::vector<std::string> identity_differences(const std::string& saved, const std::string& current) {
  std::vector<std::string> out = config_differences(saved, current);
  // Experiments recorded before rung data was fingerprinted (session 57)
  // have no such keys: not a difference of theirs.
  if (saved.find("rung ") == std::string::npos)
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const std::string& d) {
                               return d.rfind("data.rung ", 0) == 0 && d.find(": (unset) -> ") != std::string::npos;
                             }),
              out.end());
  return out;
}

const MethodRun* ExperimentState::find(const std::string& method, uint64_t seed) const {
  for (const auto& r : runs)
    if (r.method == method && r.seed == seed) return &r;
  return nullptr;
}

nlohmann::json stage_to_json(const StageResult& s, bool with_history) {
  nlohmann::json j{{"name", s.name},     {"role", s.role},     {"resolution", s.resolution},
                   {"ranks", s.ranks},   {"epochs", s.epochs}, {"time_s", s.time_s},
                   {"final_val_loss", s.final_val_loss},       {"stop_reason", s.stop_reason}};
  if (with_history) {
    j["history"] = nlohmann::json::array();
    for (const auto& e : s.history) j["history"].push_back(nlohmann::json::parse(e.to_json()));
  }
  return j;
}

StageResult stage_from_json(const nlohmann::json& j) {
  StageResult s;
  s.name = j.at("name");
  s.role = j.at("role");
  s.resolution = j.at("resolution");
  s.epochs = j.at("epochs");
  s.time_s = j.at("time_s");
  s.final_val_loss = number_or_nan(j.at("final_val_loss"));
  s.stop_reason = j.at("stop_reason");
  s.ranks = j.at("ranks");
  for (const auto& e : j.value("history", nlohmann::json::array())) s.history.push_back(EpochRecord::from_json(e));
  return s;
}

nlohmann::json method_run_to_json(const MethodRun& r, bool with_history) {
  nlohmann::json j{{"method", r.method},
                   {"seed", r.seed},
                   {"total_s", r.total_s},
                   {"fusion_s", r.fusion_s},
                   {"split_probe_s", r.split_probe_s},
                   {"final_val_loss", r.final_val_loss},
                   {"reached_target", r.reached_target},
                   {"epochs_before_fusion", r.epochs_before_fusion},
                   {"epochs_after_fusion", r.epochs_after_fusion},
                   {"concurrent_groups", r.concurrent_groups},
                   {"mrmf", r.mrmf},
                   {"stages", nlohmann::json::array()}};
  for (const auto& s : r.stages) j["stages"].push_back(stage_to_json(s, with_history));
  return j;
}

MethodRun method_run_from_json(const nlohmann::json& j) {
  MethodRun r;
  r.method = j.at("method");
  r.seed = j.at("seed");
  r.total_s = j.at("total_s");
  r.final_val_loss = number_or_nan(j.at("final_val_loss"));
  r.reached_target = j.at("reached_target");
  r.epochs_before_fusion = j.at("epochs_before_fusion");
  r.epochs_after_fusion = j.at("epochs_after_fusion");
  r.fusion_s = j.at("fusion_s");
  r.split_probe_s = j.value("split_probe_s", 0.0);  // absent in the states of older versions
  r.concurrent_groups = j.at("concurrent_groups");
  r.mrmf = j.value("mrmf", "");  // absent in the states of older versions
  for (const auto& s : j.at("stages")) r.stages.push_back(stage_from_json(s));
  return r;
}

nlohmann::json state_to_json(const ExperimentState& s) {
  nlohmann::json j{{"version", kStateVersion},
                   {"identity", s.identity},
                   {"config_text", s.config_text},
                   {"plan", nlohmann::json::array()},
                   {"runs", nlohmann::json::array()}};
  for (const auto& [m, seed] : s.plan) j["plan"].push_back({{"method", m}, {"seed", seed}});
  j["started"] = nlohmann::json::array();
  for (const auto& [m, seed] : s.started) j["started"].push_back({{"method", m}, {"seed", seed}});
  for (const auto& r : s.runs) j["runs"].push_back(method_run_to_json(r));
  return j;
}

ExperimentState state_from_json(const nlohmann::json& j) {
  ExperimentState s;
  s.identity = j.at("identity");
  (void)YAML::Load(s.identity);  // damaged text fails here, not in a later comparison
  s.config_text = j.at("config_text");
  // A method name becomes a folder that a run empties: a hand-edited
  // "../x" deleted a folder outside --out.
  const auto entry = [](const nlohmann::json& p) {
    std::pair<std::string, uint64_t> e(p.at("method").get<std::string>(), p.at("seed").get<uint64_t>());
    MRMF_CHECK_KIND(Config, is_method_name(e.first), "its plan names '", e.first,
                    "', which is not one of baseline, mrt, mrmf1, mrmf2, ..., concurrent");
    return e;
  };
  for (const auto& p : j.at("plan")) s.plan.push_back(entry(p));
  if (!j.contains("started"))
    s.started = s.plan;
  else
    for (const auto& p : j.at("started")) s.started.push_back(entry(p));
  for (const auto& r : j.at("runs")) s.runs.push_back(method_run_from_json(r));
  return s;
}

void save_experiment_state(const std::string& dir, const ExperimentState& state) {
  fs::create_directories(dir);
  data::write_text_atomically((fs::path(dir) / kExperimentStateFile).string(), state_to_json(state).dump(1) + "\n");
}

ExperimentState load_experiment_state(const std::string& path) {
  std::ifstream in(path);
  MRMF_CHECK_KIND(Config, in.good(), "cannot read the experiment state ", path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  int version = 0;
  try {
    j = nlohmann::json::parse(text.str());
    version = j.at("version");
  } catch (const nlohmann::json::exception& e) {
    MRMF_THROW(Config, "the experiment state ", path, " is damaged or was not written by mrmf (", e.what(),
               "); --force starts the experiment over");
  }
  MRMF_CHECK_KIND(Config, version == kStateVersion, "the experiment state ", path, " has version ", version,
                  "; this mrmf reads version ", kStateVersion);
  try {
    return state_from_json(j);
  } catch (const nlohmann::json::exception& e) {
    MRMF_THROW(Config, "the experiment state ", path, " is damaged or was not written by mrmf (", e.what(),
               "); --force starts the experiment over");
  } catch (const YAML::Exception& e) {
    MRMF_THROW(Config, "the experiment state ", path, " is damaged (its identity: ", e.what(),
               "); --force starts the experiment over");
  } catch (const Error& e) {
    MRMF_THROW(Config, "the experiment state ", path, " is damaged: ", e.message(),
               "; --force starts the experiment over");
  }
}

}  // namespace mrmf
