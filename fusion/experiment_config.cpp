#include "fusion/experiment_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "fusion/config.h"

namespace mrmf {
namespace fs = std::filesystem;

std::string resolution_key(const Resolution& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) s += (i ? "," : "") + std::to_string(r[i]);
  return s.empty() ? "1" : s;
}

bool is_original(const Resolution& r) {
  for (int64_t f : r)
    if (f != 1) return false;
  return true;
}

bool names_rung(const std::string& key, const Resolution& r) {
  Resolution k;  // the key's factors; a key that is not a list of integers names no rung
  std::stringstream in(key);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    int64_t f = 0;
    try {
      f = std::stoll(item, &used);
    } catch (const std::exception&) {
      return false;
    }
    if (item.find_first_not_of(' ', used) != std::string::npos) return false;
    k.push_back(f);
  }
  const auto uniform = [](const Resolution& x) {
    return !x.empty() && std::all_of(x.begin(), x.end(), [&](int64_t f) { return f == x[0]; });
  };
  if (k == r) return true;  // as written, or with spaces after commas
  // One factor written once names it on every axis (data.reduce): "2" is "2,2,2".
  return uniform(k) && uniform(r) && k[0] == r[0] && (k.size() == 1 || r.size() == 1);
}

const std::vector<std::string>* rung_overrides(const ExperimentConfig& c, const Resolution& r) {
  for (const auto& [key, sets] : c.resolution_overrides)
    if (names_rung(key, r)) return &sets;
  return nullptr;
}

std::vector<Resolution> ExperimentConfig::ladder_for(const std::string& method) const {
  const Resolution coarse1 = one_fusion_coarse.empty() ? ladder[ladder.size() - 2] : one_fusion_coarse;
  if (method == "baseline") return {ladder.back()};
  if (method == "mrt" || method == "mrmf1" || method == "concurrent") return {coarse1, ladder.back()};
  // mrmfN: the last N + 1 rungs
  const size_t n = static_cast<size_t>(std::stoi(method.substr(4)));
  return std::vector<Resolution>(ladder.end() - static_cast<std::ptrdiff_t>(n + 1), ladder.end());
}

StageStops ExperimentConfig::stops_for_stage(size_t stage) const {
  return stage < stages.size() ? stages[stage] : StageStops{coarse_stop, dense_stop};
}

namespace {
// Packed by hand: clang-format would give each key a line of its own.
// clang-format off
const std::set<std::string> kExperimentKeys = {
    "methods", "seeds", "target_val_loss", "max_epochs", "ladder", "one_fusion_coarse", "coarse_stop", "dense_stop",
    "stages", "resolution_overrides", "finetune_overrides", "optimizer_at_fusion", "mrt_top",
    "bn_recalibration_batches", "concurrent_times", "probe_steps", "shared_init", "stage_checkpoints",
    "concurrent_overtime"};
// clang-format on
}  // namespace

const std::set<std::string>& experiment_keys() { return kExperimentKeys; }

namespace {

template <class T>
struct Expected {
  static constexpr const char* what = "a value of another type";
};
template <>
struct Expected<int64_t> {
  static constexpr const char* what = "an integer";
};
template <>
struct Expected<double> {
  static constexpr const char* what = "a number";
};
template <>
struct Expected<bool> {
  static constexpr const char* what = "true or false";
};
template <>
struct Expected<std::string> {
  static constexpr const char* what = "a string";
};
template <>
struct Expected<std::vector<std::string>> {
  static constexpr const char* what = "a list of names";
};
template <>
struct Expected<std::vector<uint64_t>> {
  static constexpr const char* what = "a list of non-negative integers";
};
template <>
struct Expected<std::vector<int64_t>> {
  static constexpr const char* what = "a list of integers";
};
template <>
struct Expected<std::vector<double>> {
  static constexpr const char* what = "a list of numbers";
};
template <>
struct Expected<std::map<std::string, std::vector<std::string>>> {
  static constexpr const char* what = "a map from rung to a list of key=value settings";
};

template <class T>
T get(const YAML::Node& n, const std::string& key) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    MRMF_THROW(Config, "experiment key '", key, "': wrong type: expected ", Expected<T>::what, ", got '", YAML::Dump(n),
               "'");
  }
}

Resolution parse_resolution(const YAML::Node& n, const std::string& key) {
  Resolution r = n.IsScalar() ? Resolution{get<int64_t>(n, key)} : get<std::vector<int64_t>>(n, key);
  MRMF_CHECK_KIND(Config, !r.empty(), "experiment key '", key, "': an empty resolution");
  for (int64_t f : r) MRMF_CHECK_KIND(Config, f >= 1, "experiment key '", key, "': factors must be >= 1, got ", f);
  return r;
}

StopRule parse_stop(const YAML::Node& n, const std::string& key, StopRule base) {
  MRMF_CHECK_KIND(Config, n.IsMap(), "experiment key '", key,
                  "': expected {threshold, patience, max_epochs, min_epochs, reference}");
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (k == "threshold") base.threshold = get<double>(kv.second, key + ".threshold");
    else if (k == "patience") base.patience = get<int64_t>(kv.second, key + ".patience");
    else if (k == "max_epochs") base.max_epochs = get<int64_t>(kv.second, key + ".max_epochs");
    else if (k == "min_epochs") base.min_epochs = get<int64_t>(kv.second, key + ".min_epochs");
    else if (k == "reference") base.reference = get<std::string>(kv.second, key + ".reference");
    else
      MRMF_THROW(Config, "unknown experiment key '", key, ".", k,
                 "' (expected threshold, patience, max_epochs, min_epochs, reference)");
  }
  MRMF_CHECK_KIND(Config, std::isfinite(base.threshold) && base.threshold >= 0, "experiment key '", key,
                  ".threshold': must be a finite number >= 0, got ", base.threshold);
  MRMF_CHECK_KIND(Config, base.threshold == 0 || base.patience >= 1, "experiment key '", key,
                  ".patience': must be at least 1 when a threshold is set");
  MRMF_CHECK_KIND(Config, base.max_epochs >= 1, "experiment key '", key, ".max_epochs': must be at least 1");
  MRMF_CHECK_KIND(Config, base.min_epochs >= 0, "experiment key '", key, ".min_epochs': must be >= 0");
  // min_epochs past max_epochs is allowed (a guard cut short with --set):
  // the orchestrator's notice says the guard ends that stage.
  MRMF_CHECK_KIND(Config, base.reference == "previous" || base.reference == "best", "experiment key '", key,
                  ".reference': '", base.reference, "' is not one of previous, best");
  return base;
}

}  // namespace

bool is_method_name(const std::string& m) {
  // mrmfN with N written as a number from 1 without leading zeros: one
  // spelling per method (mrmf01 would run mrmf1 again in its own folder).
  const bool mrmf_n = m.size() > 4 && m.size() <= 7 && m.rfind("mrmf", 0) == 0 && m[4] != '0' &&
                      m.find_first_not_of("0123456789", 4) == std::string::npos;
  return m == "baseline" || m == "mrt" || m == "concurrent" || mrmf_n;
}

void check_method_fits_ladder(const ExperimentConfig& c, const std::string& m, const std::string& who) {
  MRMF_CHECK_KIND(Config, is_method_name(m), who, ": '", m,
                  "' is not one of baseline, mrt, mrmf1, mrmf2, ..., concurrent");
  if (m.rfind("mrmf", 0) == 0) {
    const int n = std::stoi(m.substr(4));
    MRMF_CHECK_KIND(Config, static_cast<size_t>(n) + 1 <= c.ladder.size(), "experiment method '", m, "' needs ", n + 1,
                    " rungs in the ladder, which has ", c.ladder.size());
  }
}

namespace {

void validate_methods(const ExperimentConfig& c) {
  MRMF_CHECK_KIND(Config, !c.methods.empty(), "experiment key 'methods': no method given");
  std::set<std::string> seen;  // a repeat would run and count the same seed twice
  for (const auto& m : c.methods) {
    check_method_fits_ladder(c, m, "experiment key 'methods'");
    MRMF_CHECK_KIND(Config, seen.insert(m).second, "experiment key 'methods': '", m, "' is given twice");
  }
}
// An experiment file's top level: 'experiment' and either 'run' or 'base'.
void check_sections(const YAML::Node& root, const std::string& origin) {
  MRMF_CHECK_KIND(Config, root.IsMap(), origin, ": expected a map with 'run' (or 'base') and 'experiment'");
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    MRMF_CHECK_KIND(Config, k == "run" || k == "base" || k == "experiment", origin, ": unknown section '", k,
                    "' (expected run, base, experiment)");
  }
  MRMF_CHECK_KIND(Config, !(root["run"] && root["base"]), origin, ": give either 'run' or 'base', not both");
}

// The file `root["base"]` names: as given where that exists from the
// working directory, else relative to the naming file's folder.
fs::path base_path(const YAML::Node& root, const std::string& base_dir) {
  MRMF_CHECK_KIND(Config, !root["base"].IsNull(),
                  "'base' has no value, expected the path of a run configuration or "
                  "experiment file");
  fs::path p = get<std::string>(root["base"], "base");
  std::error_code ec;  // a link loop is an error of the read below, not here
  if (p.is_relative() && !fs::exists(fs::symlink_status(p, ec))) p = fs::path(base_dir) / p;
  return p;
}

// `base` may name a run configuration or another EXPERIMENT file (one with
// an 'experiment' section). An experiment base lends its run configuration
// and every experiment key this file does not set; a key set here replaces
// the inherited value whole (a coarse_stop given here replaces the base's
// coarse_stop). So a variant of an experiment states only what it changes
// (configs/experiments/cf_gpu_paper_stops.yaml). Returns `root` with the
// chain resolved: 'run' inline, or 'base' as a path to a run configuration,
// whose text is left in `run_text` (the file is read once).
YAML::Node resolve_base_chain(const YAML::Node& root, const std::string& origin, const std::string& base_dir,
                              int depth, std::string& run_text) {
  if (!root["base"]) return root;
  const fs::path p = base_path(root, base_dir);
  std::error_code ec;
  MRMF_CHECK_KIND(Config, !fs::is_directory(p, ec), origin, ": 'base' names the folder '", p.string(),
                  "', expected a run configuration or experiment file");
  const std::string text = read_config_file(p.string(), "the base of " + origin);
  YAML::Node parent;
  try {
    parent = load_yaml_document(text);
  } catch (const YAML::ParserException& e) {
    MRMF_THROW(Config, p.string(), ":", e.mark.line + 1, ": invalid YAML: ", e.msg, " (the base of ", origin, ")");
  }
  check_unique_keys(parent, p.string());
  YAML::Node out = YAML::Clone(root);
  if (!parent.IsMap() || !parent["experiment"]) {  // a run configuration
    out["base"] = p.string();
    run_text = text;
    return out;
  }
  check_sections(parent, p.string());
  MRMF_CHECK_KIND(Config, depth < 8, origin, ": more than 8 experiment files chained by 'base' (does one name itself?)");
  YAML::Node merged =
      YAML::Clone(resolve_base_chain(parent, p.string(), p.parent_path().string(), depth + 1, run_text));
  if (root["experiment"]) {
    MRMF_CHECK_KIND(Config, root["experiment"].IsMap(), origin, ": 'experiment' must be a map");
    MRMF_CHECK_KIND(Config, merged["experiment"].IsMap(), p.string(), ": 'experiment' must be a map");
    for (const auto& kv : root["experiment"]) merged["experiment"][kv.first.as<std::string>()] = kv.second;
  }
  return merged;
}
}  // namespace

ExperimentConfig parse_experiment_config(const std::string& text, const std::vector<std::string>& overrides,
                                         const std::string& origin, const std::string& base_dir) {
  YAML::Node root;
  try {
    root = load_yaml_document(text);
  } catch (const YAML::ParserException& e) {
    MRMF_THROW(Config, origin, ":", e.mark.line + 1, ": invalid YAML: ", e.msg);
  }
  check_unique_keys(root, origin);
  check_sections(root, origin);
  ExperimentConfig c;
  std::string base_run_text;
  root = resolve_base_chain(root, origin, base_dir, 0, base_run_text);
  for (const auto& o : overrides) {
    if (o.rfind("experiment.", 0) == 0) apply_override(root, o);
    else c.run_sets.push_back(o);
  }
  if (root["base"]) {
    c.run_yaml = base_run_text;  // read by resolve_base_chain
  } else if (root["run"]) {
    c.run_yaml = YAML::Dump(root["run"]);
  } else {
    MRMF_THROW(Config, origin,
               ": no run configuration: give 'run' (inline) or 'base' (a run configuration or "
               "experiment file)");
  }

  const YAML::Node e = root["experiment"];
  if (e) {
    MRMF_CHECK_KIND(Config, e.IsMap(), origin, ": 'experiment' must be a map");
    for (const auto& kv : e) {
      const std::string k = kv.first.as<std::string>();
      MRMF_CHECK_KIND(Config, kExperimentKeys.count(k), origin, ": unknown experiment key '", k, "'");
    }
    if (e["methods"]) c.methods = get<std::vector<std::string>>(e["methods"], "methods");
    if (e["seeds"]) c.seeds = get<std::vector<uint64_t>>(e["seeds"], "seeds");
    if (e["target_val_loss"]) c.target_val_loss = get<double>(e["target_val_loss"], "target_val_loss");
    if (e["max_epochs"]) c.max_epochs = get<int64_t>(e["max_epochs"], "max_epochs");
    if (e["ladder"]) {
      MRMF_CHECK_KIND(Config, e["ladder"].IsSequence(),
                      "experiment key 'ladder': expected a list of resolutions "
                      "from coarse to fine, e.g. [[4], [2], [1]], got '",
                      YAML::Dump(e["ladder"]), "'");
      c.ladder.clear();
      for (size_t i = 0; i < e["ladder"].size(); ++i)
        c.ladder.push_back(parse_resolution(e["ladder"][i], "ladder[" + std::to_string(i) + "]"));
    }
    if (e["one_fusion_coarse"]) c.one_fusion_coarse = parse_resolution(e["one_fusion_coarse"], "one_fusion_coarse");
    if (e["coarse_stop"]) c.coarse_stop = parse_stop(e["coarse_stop"], "coarse_stop", c.coarse_stop);
    if (e["dense_stop"]) c.dense_stop = parse_stop(e["dense_stop"], "dense_stop", c.dense_stop);
    if (e["stages"]) {
      MRMF_CHECK_KIND(Config, e["stages"].IsSequence(),
                      "experiment key 'stages': expected a list with one map "
                      "{coarse_stop, dense_stop} per fusion stage, got '",
                      YAML::Dump(e["stages"]), "'");
      for (size_t i = 0; i < e["stages"].size(); ++i) {
        const YAML::Node s = e["stages"][i];
        const std::string key = "stages[" + std::to_string(i) + "]";
        MRMF_CHECK_KIND(Config, s.IsMap(), "experiment key '", key,
                        "': expected a map {coarse_stop, dense_stop}, got '", YAML::Dump(s), "'");
        StageStops st{c.coarse_stop, c.dense_stop};
        for (const auto& kv : s) {
          const std::string k = kv.first.as<std::string>();
          if (k == "coarse_stop") st.coarse = parse_stop(kv.second, key + ".coarse_stop", st.coarse);
          else if (k == "dense_stop") st.dense = parse_stop(kv.second, key + ".dense_stop", st.dense);
          else MRMF_THROW(Config, "unknown experiment key '", key, ".", k, "'");
        }
        c.stages.push_back(st);
      }
    }
    if (e["resolution_overrides"])
      c.resolution_overrides =
          get<std::map<std::string, std::vector<std::string>>>(e["resolution_overrides"], "resolution_overrides");
    if (e["finetune_overrides"])
      c.finetune_overrides = get<std::vector<std::string>>(e["finetune_overrides"], "finetune_overrides");
    if (e["optimizer_at_fusion"]) c.optimizer_at_fusion = get<std::string>(e["optimizer_at_fusion"], "optimizer_at_fusion");
    if (e["mrt_top"]) c.mrt_top = get<std::string>(e["mrt_top"], "mrt_top");
    if (e["shared_init"]) c.shared_init = get<bool>(e["shared_init"], "shared_init");
    if (e["stage_checkpoints"]) c.stage_checkpoints = get<bool>(e["stage_checkpoints"], "stage_checkpoints");
    if (e["bn_recalibration_batches"])
      c.bn_recalibration_batches = get<int64_t>(e["bn_recalibration_batches"], "bn_recalibration_batches");
    if (e["concurrent_times"]) c.concurrent_times = get<std::vector<double>>(e["concurrent_times"], "concurrent_times");
    if (e["probe_steps"]) c.probe_steps = get<int64_t>(e["probe_steps"], "probe_steps");
    if (e["concurrent_overtime"]) c.concurrent_overtime = get<bool>(e["concurrent_overtime"], "concurrent_overtime");
  }

  MRMF_CHECK_KIND(Config, c.ladder.size() >= 2, "experiment key 'ladder': needs at least two resolutions");
  MRMF_CHECK_KIND(Config, is_original(c.ladder.back()), "experiment key 'ladder': the last rung must be the original "
                  "resolution ([1]), got [", resolution_key(c.ladder.back()), "]");
  // Coarse to fine: each rung reduces the data strictly less than the one
  // before it (a single factor applies to every spatial axis).
  size_t axes = 1;
  for (const auto& r : c.ladder) axes = std::max(axes, r.size());
  const auto reduction = [axes](const Resolution& r) {
    int64_t p = 1;
    for (size_t a = 0; a < axes; ++a) p *= r.size() == 1 ? r[0] : (a < r.size() ? r[a] : 1);
    return p;
  };
  for (size_t i = 0; i + 1 < c.ladder.size(); ++i)
    MRMF_CHECK_KIND(Config, reduction(c.ladder[i]) > reduction(c.ladder[i + 1]), "experiment key 'ladder': rungs go "
                    "from coarse to fine, but [", resolution_key(c.ladder[i]), "] is followed by [",
                    resolution_key(c.ladder[i + 1]), "], which is not finer");
  MRMF_CHECK_KIND(Config, !c.seeds.empty(), "experiment key 'seeds': no seed given");
  {
    std::set<uint64_t> seen;  // a repeated seed would repeat a run bit for bit (deterministic mode)
    for (uint64_t seed : c.seeds)
      MRMF_CHECK_KIND(Config, seen.insert(seed).second, "experiment key 'seeds': ", seed, " is given twice");
  }
  MRMF_CHECK_KIND(Config, std::isfinite(c.target_val_loss) && c.target_val_loss > 0,
                  "experiment key 'target_val_loss': must be a finite positive number (every method trains to the "
                  "same target), got ",
                  c.target_val_loss);
  MRMF_CHECK_KIND(Config, c.stages.size() + 1 <= c.ladder.size(), "experiment key 'stages': ", c.stages.size(),
                  " entries, but the ladder's ", c.ladder.size(), " rungs make at most ", c.ladder.size() - 1,
                  " fusion stage(s)");
  MRMF_CHECK_KIND(Config, c.max_epochs >= 1, "experiment key 'max_epochs': must be at least 1");
  MRMF_CHECK_KIND(Config, c.optimizer_at_fusion == "reset" || c.optimizer_at_fusion == "keep",
                  "experiment key 'optimizer_at_fusion': '", c.optimizer_at_fusion, "' is not one of reset, keep");
  MRMF_CHECK_KIND(Config, c.mrt_top == "fresh" || c.mrt_top == "resample", "experiment key 'mrt_top': '", c.mrt_top,
                  "' is not one of fresh, resample");
  MRMF_CHECK_KIND(Config, c.bn_recalibration_batches >= 0,
                  "experiment key 'bn_recalibration_batches': must be >= 0 (0: off), got ", c.bn_recalibration_batches);
  MRMF_CHECK_KIND(Config,
                  c.concurrent_times.empty() ||
                      (c.concurrent_times.size() == 2 && std::isfinite(c.concurrent_times[0]) &&
                       std::isfinite(c.concurrent_times[1]) && c.concurrent_times[0] > 0 && c.concurrent_times[1] > 0),
                  "experiment key 'concurrent_times': expected [t_dense, t_coarse], both finite and positive");
  MRMF_CHECK_KIND(Config, c.probe_steps >= 1, "experiment key 'probe_steps': must be at least 1");
  validate_methods(c);
  // Every run configuration the experiment will use must parse: the file's
  // with --set (its errors named as theirs), then each rung's overrides.
  parse_run_config(c.run_yaml, c.run_sets, origin + " (run configuration)");
  for (const auto& r : c.ladder) {
    std::vector<std::string> sets = c.run_sets;
    if (const auto* over = rung_overrides(c, r)) {
      sets.insert(sets.end(), over->begin(), over->end());
      try {  // an entry's error said "--set '...'"
        parse_run_config(c.run_yaml, sets, origin + " (run configuration at resolution " + resolution_key(r) + ")");
      } catch (const Error& e) {
        MRMF_THROW(Config, "experiment key 'resolution_overrides' (rung ", resolution_key(r), "): ", e.message());
      }
    }
    if (is_original(r) && !c.finetune_overrides.empty()) {
      sets.insert(sets.end(), c.finetune_overrides.begin(), c.finetune_overrides.end());
      try {  // name the experiment key: the error is the overrides' together with the base's keys
        parse_run_config(c.run_yaml, sets, origin + " (run configuration of the fine-tuning stages)");
      } catch (const Error& e) {
        MRMF_THROW(Config,
                   "experiment key 'finetune_overrides': the fine-tuning stages' run configuration: ", e.message());
      }
    }
  }
  // The experiment sets these in every stage's run configuration (from its
  // own keys): an override of them would be silently replaced.
  const auto check_owned = [](const std::string& set, const std::string& where) {
    const std::string key = set.substr(0, set.find('='));
    // A whole section (train={...}, data={...}) sets them too.
    MRMF_CHECK_KIND(Config,
                    key != "data.reduce" && key != "train.seed" && key.rfind("stop.", 0) != 0 && key != "stop" &&
                        key != "train.epochs" && key != "train" && key != "data",
                    where, " '", set, "': the experiment sets '", key,
                    "' in every stage (from its ladder, seeds, "
                    "max_epochs, target_val_loss and stop rules); set those experiment keys instead");
  };
  for (const auto& set : c.run_sets) check_owned(set, "--set");
  for (const auto& [key, sets] : c.resolution_overrides)
    for (const auto& set : sets) {
      check_owned(set, "experiment key 'resolution_overrides' (rung " + key + "):");
      // The device and threads are chosen once, for every stage: a rung's
      // runtime keys were silently ignored.
      MRMF_CHECK_KIND(Config, set.rfind("runtime", 0) != 0, "experiment key 'resolution_overrides' (rung ", key, "): '",
                      set,
                      "': the device and threads are chosen once for the whole experiment; give "
                      "runtime keys with --set or in the run configuration");
    }
  for (const auto& set : c.finetune_overrides) {
    check_owned(set, "experiment key 'finetune_overrides':");
    // The fused or transferred model is built before its stage's
    // configuration: its model, data, starting point and runtime are those
    // of the original rung (runtime keys would also put stages of one run
    // on different launches). A whole `train={...}` section would also reset
    // that section's other keys for this stage only.
    const std::string key = set.substr(0, set.find('='));
    bool fixed = key == "train";
    for (const char* prefix : {"model", "data", "runtime", "train.init"}) fixed = fixed || key.rfind(prefix, 0) == 0;
    MRMF_CHECK_KIND(Config, !fixed, "experiment key 'finetune_overrides': '", set,
                    "': the fine-tuned model is the fused or transferred one, built from the original rung's model, "
                    "data and runtime keys; ",
                    key.rfind("runtime", 0) == 0 ? "give runtime keys with --set, for the whole experiment"
                    : key.rfind("train.init", 0) == 0
                        ? "a stage that starts from a fused or transferred model does not read train.init"
                        : "set '" + key + "' for every stage (--set or resolution_overrides of rung [1]) instead");
    // Kept optimizer state travels into the fine-tuning stage's optimizer:
    // it must be the same kind with the same state buffers.
    if (c.optimizer_at_fusion == "keep")
      for (const char* k : {"optimizer", "optimizer.name", "optimizer.momentum", "optimizer.nesterov"})
        MRMF_CHECK_KIND(Config, key != k, "experiment key 'finetune_overrides': '", set,
                        "' changes the optimizer whose state optimizer_at_fusion: keep carries into the "
                        "fine-tuning stage; change it for every stage, or use optimizer_at_fusion: reset");
  }
  std::vector<Resolution> rungs = c.ladder;
  if (!c.one_fusion_coarse.empty()) rungs.push_back(c.one_fusion_coarse);
  for (const auto& r : rungs) {  // two spellings of one rung: which would apply?
    std::vector<std::string> keys;
    for (const auto& kv : c.resolution_overrides)
      if (names_rung(kv.first, r)) keys.push_back("'" + kv.first + "'");
    MRMF_CHECK_KIND(Config, keys.size() <= 1,
                    "experiment key 'resolution_overrides': ", fmt::format("{}", fmt::join(keys, " and ")),
                    " name the same rung [", resolution_key(r), "]; give its overrides under one key");
  }
  for (const auto& [key, sets] : c.resolution_overrides) {
    const bool found = std::any_of(rungs.begin(), rungs.end(), [&](const Resolution& r) { return names_rung(key, r); });
    if (!found) {
      std::vector<std::string> written;
      for (const auto& r : rungs) written.push_back("'" + resolution_key(r) + "'");
      MRMF_THROW(Config, "experiment key 'resolution_overrides': '", key,
                 "' is not a rung of the ladder (its rungs: ", fmt::format("{}", fmt::join(written, ", ")), ")");
    }
    // Kept optimizer state travels between rungs (coarse -> fused -> next
    // stage): an optimizer of another kind or state buffers on one rung
    // would fail only at the first fusion, after its stages have trained.
    if (c.optimizer_at_fusion == "keep")
      for (const auto& set : sets) {
        const std::string k = set.substr(0, set.find('='));
        for (const char* o : {"optimizer", "optimizer.name", "optimizer.momentum", "optimizer.nesterov"})
          MRMF_CHECK_KIND(Config, k != o, "experiment key 'resolution_overrides': '", set, "' (rung ", key,
                          ") changes the optimizer whose state optimizer_at_fusion: keep carries from rung to rung; "
                          "change it for every stage, or use optimizer_at_fusion: reset");
      }
  }
  return c;
}

ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
  ExperimentConfig c = parse_experiment_config(read_config_file(path, "experiment config"), overrides, path,
                                               fs::path(path).parent_path().string());
  // A rung that chooses its own optimizer or schedule may read keys the
  // base's does not: no notice of unused keys then.
  bool rung_chooses = false;
  std::vector<std::string> stage_sets = c.finetune_overrides;
  for (const auto& [rung, sets] : c.resolution_overrides) stage_sets.insert(stage_sets.end(), sets.begin(), sets.end());
  for (const auto& a : stage_sets)
    for (const char* k : {"optimizer.name", "schedule.type", "optimizer=", "schedule="})
      rung_chooses = rung_chooses || a.rfind(k, 0) == 0;
  check_user_config(parse_run_config(c.run_yaml, c.run_sets, path + " (run configuration)"), !rung_chooses);
  return c;
}

}  // namespace mrmf
