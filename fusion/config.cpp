#include "fusion/config.h"

#if __has_include(<yaml-cpp/depthguard.h>)  // yaml-cpp 0.7 and later
#include <yaml-cpp/depthguard.h>
#define MRMF_YAML_DEPTH_GUARD 1
#endif
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/device.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "data/loader.h"

namespace mrmf {
namespace fs = std::filesystem;
namespace {

// One schema entry: a dotted key, how to read it into the config, and how
// to write its current value back (for the effective-config text).
struct Field {
  std::string key;
  std::function<void(RunConfig&, const YAML::Node&)> read;
  std::function<void(const RunConfig&, YAML::Node&)> write;
};

template <class T>
const char* type_word() {
  if constexpr (std::is_same_v<T, bool>) return "a boolean (true/false)";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else return "a string";
}

template <class T>
T convert(const std::string& key, const YAML::Node& n) {
  if (!n.IsScalar())
    MRMF_THROW(Config, "config key '", key, "': expected ", type_word<T>(), ", got a ",
               n.IsSequence() ? "list" : "map");
  try {
    if constexpr (std::is_same_v<T, uint64_t>) {
      // yaml-cpp accepts "-1" for unsigned types by wrapping; refuse it.
      const auto s = n.as<std::string>();
      MRMF_CHECK_KIND(Config, s.empty() || s[0] != '-', "config key '", key, "': expected a non-negative integer, got '",
                      s, "'");
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // yaml-cpp reads 016 as octal (14), YAML 1.2 as 16: refused, not guessed.
      const auto s = n.as<std::string>();
      const size_t d = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
      MRMF_CHECK_KIND(Config,
                      !(s.size() > d + 1 && s[d] == '0' && s.find_first_not_of("0123456789", d) == std::string::npos),
                      "config key '", key, "': '", s,
                      "' has a leading zero, which YAML readers take as octal or as decimal; write it without");
    }
    return n.as<T>();
  } catch (const YAML::Exception&) {
    MRMF_THROW(Config, "config key '", key, "': expected ", type_word<T>(), ", got '", n.as<std::string>(), "'");
  }
}

template <class T>
std::vector<T> convert_list(const std::string& key, const YAML::Node& n) {
  std::vector<T> out;
  if (n.IsScalar()) {  // a single value is a one-element list
    out.push_back(convert<T>(key, n));
    return out;
  }
  MRMF_CHECK_KIND(Config, n.IsSequence() || n.IsNull(), "config key '", key, "': expected a list of ", type_word<T>());
  for (size_t i = 0; i < n.size(); ++i) out.push_back(convert<T>(key + "[" + std::to_string(i) + "]", n[i]));
  return out;
}

#define MRMF_FIELD(KEY, MEMBER, TYPE)                                                                   \
  Field {                                                                                               \
    KEY, [](RunConfig& c, const YAML::Node& n) { c.MEMBER = convert<TYPE>(KEY, n); },                  \
        [](const RunConfig& c, YAML::Node& out) { out = c.MEMBER; }                                     \
  }
#define MRMF_LIST_FIELD(KEY, MEMBER, TYPE)                                                              \
  Field {                                                                                               \
    KEY, [](RunConfig& c, const YAML::Node& n) { c.MEMBER = convert_list<TYPE>(KEY, n); },             \
        [](const RunConfig& c, YAML::Node& out) {                                                      \
          out = YAML::Node(YAML::NodeType::Sequence);                                                   \
          for (const auto& v : c.MEMBER) out.push_back(v);                                              \
        }                                                                                               \
  }

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      MRMF_FIELD("model.name", model.name, std::string),
      MRMF_FIELD("model.variant", model.variant, std::string),
      MRMF_FIELD("data.format", data.format, std::string),
      MRMF_FIELD("data.path", data.path, std::string),
      MRMF_FIELD("data.train_files", data.train_files, std::string),
      MRMF_FIELD("data.val_files", data.val_files, std::string),
      MRMF_FIELD("data.test_files", data.test_files, std::string),
      MRMF_FIELD("data.layout", data.layout, std::string),
      MRMF_FIELD("data.transform", data.transform, std::string),
      MRMF_LIST_FIELD("data.scale", data.scale, double),
      MRMF_LIST_FIELD("data.reduce", data.reduce, int64_t),
      MRMF_FIELD("data.cache", data.cache, bool),
      MRMF_FIELD("data.reduce_on", data.reduce_on, std::string),
      MRMF_FIELD("data.prefetch", data.prefetch, int64_t),
      MRMF_FIELD("data.io_threads", data.io_threads, int64_t),
      MRMF_FIELD("data.max_train_samples", data.max_train_samples, int64_t),
      MRMF_FIELD("data.cache_max_mb", data.cache_max_mb, int64_t),
      MRMF_FIELD("data.memory_map", data.memory_map, bool),
      MRMF_FIELD("train.batch_size", train.batch_size, int64_t),
      MRMF_FIELD("train.val_batch_size", train.val_batch_size, int64_t),
      MRMF_FIELD("train.seed", train.seed, uint64_t),
      MRMF_FIELD("train.deterministic", train.deterministic, bool),
      MRMF_FIELD("train.checkpoint_every", train.checkpoint_every, int64_t),
      MRMF_FIELD("train.checkpoint_every_steps", train.checkpoint_every_steps, int64_t),
      MRMF_FIELD("train.max_steps_per_epoch", train.max_steps_per_epoch, int64_t),
      MRMF_FIELD("train.bucket_mb", train.bucket_mb, int64_t),
      MRMF_FIELD("train.precise_bn_batches", train.precise_bn_batches, int64_t),
      MRMF_FIELD("train.init", train.init, std::string),
      MRMF_FIELD("train.init_groups", train.init_groups, std::string),
      MRMF_FIELD("train.freeze", train.freeze, std::string),
      MRMF_FIELD("optimizer.name", optimizer.name, std::string),
      MRMF_FIELD("optimizer.lr", optimizer.lr, double),
      MRMF_FIELD("optimizer.beta1", optimizer.beta1, double),
      MRMF_FIELD("optimizer.beta2", optimizer.beta2, double),
      MRMF_FIELD("optimizer.eps", optimizer.eps, double),
      MRMF_FIELD("optimizer.weight_decay", optimizer.weight_decay, double),
      MRMF_FIELD("optimizer.momentum", optimizer.momentum, double),
      MRMF_FIELD("optimizer.nesterov", optimizer.nesterov, bool),
      MRMF_FIELD("schedule.type", schedule.type, std::string),
      MRMF_FIELD("schedule.warmup_epochs", schedule.warmup_epochs, int64_t),
      MRMF_FIELD("schedule.warmup_steps", schedule.warmup_steps, int64_t),
      MRMF_FIELD("schedule.plateau_factor", schedule.plateau_factor, double),
      MRMF_FIELD("schedule.plateau_patience", schedule.plateau_patience, int64_t),
      MRMF_FIELD("schedule.plateau_cooldown", schedule.plateau_cooldown, int64_t),
      MRMF_FIELD("schedule.plateau_min_lr", schedule.plateau_min_lr, double),
      MRMF_LIST_FIELD("schedule.boundaries", schedule.boundaries, int64_t),
      MRMF_LIST_FIELD("schedule.values", schedule.values, double),
      MRMF_FIELD("schedule.decay_steps", schedule.decay_steps, int64_t),
      MRMF_FIELD("schedule.end_lr", schedule.end_lr, double),
      MRMF_FIELD("schedule.power", schedule.power, double),
      MRMF_FIELD("stop.max_epochs", stop.max_epochs, int64_t),
      MRMF_FIELD("stop.target_val_loss", stop.target_val_loss, double),
      MRMF_FIELD("stop.plateau_threshold", stop.plateau_threshold, double),
      MRMF_FIELD("stop.plateau_patience", stop.plateau_patience, int64_t),
      MRMF_FIELD("stop.min_epochs", stop.min_epochs, int64_t),
      MRMF_FIELD("stop.plateau_reference", stop.plateau_reference, std::string),
      MRMF_FIELD("runtime.device", runtime.device, std::string),
      MRMF_FIELD("runtime.threads", runtime.threads, int64_t),
      MRMF_FIELD("runtime.allow_tf32", runtime.allow_tf32, bool),
      MRMF_FIELD("runtime.cudnn_benchmark", runtime.cudnn_benchmark, bool),
      MRMF_FIELD("runtime.cudnn_workspace_mb", runtime.cudnn_workspace_mb, int64_t),
  };
  return fields;
}
#undef MRMF_FIELD
#undef MRMF_LIST_FIELD

// Free-form maps: any key below them is accepted as a string.
bool is_open_map(const std::string& key) { return key == "model.options"; }

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Other names users reach for: `train.epochs` (as in `mrmf train --set
// train.epochs=5`) is the epoch guard stop.max_epochs.
const std::vector<std::pair<std::string, std::string>>& key_aliases() {
  static const std::vector<std::pair<std::string, std::string>> a = {{"train.epochs", "stop.max_epochs"}};
  return a;
}

std::string canonical_key(const std::string& key) {
  for (const auto& [alias, key_] : key_aliases())
    if (key == alias) return key_;
  return key;
}

std::string suggestion(const std::string& key) {
  std::string best;
  size_t best_d = 4;  // suggest only close matches
  std::vector<std::string> candidates = run_config_keys();
  for (const auto& a : key_aliases()) candidates.push_back(a.first);
  for (const auto& k : candidates) {
    const size_t d = edit_distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// A model option's value as the models read it (a string): a scalar as
// written, a list of scalars as the comma list the models parse
// (`conv_channels: [8, 16]` == `conv_channels: '8,16'`).
std::string option_value(const YAML::Node& v, const std::string& key) {
  if (v.IsScalar()) return v.Scalar();
  if (v.IsSequence()) {
    std::string out;
    for (const auto& e : v) {
      MRMF_CHECK_KIND(Config, e.IsScalar(), "config key '", key, "': expected a value or a list of values");
      out += (out.empty() ? "" : ",") + e.Scalar();
    }
    return out;
  }
  MRMF_THROW(Config, "config key '", key, "': expected a value or a list of values, got ",
             v.IsMap() ? "a map" : "nothing");
}

void collect_leaves(const YAML::Node& n, const std::string& prefix, std::vector<std::pair<std::string, YAML::Node>>& out,
                    RunConfig& cfg) {
  // An empty map is kept as a leaf: `bogus: {}` or a misspelt section with
  // nothing in it would otherwise pass unseen.
  if (!n.IsMap() || (n.size() == 0 && !prefix.empty())) {
    out.emplace_back(prefix, n);
    return;
  }
  for (const auto& kv : n) {
    const std::string key = (prefix.empty() ? "" : prefix + ".") + kv.first.as<std::string>();
    if (is_open_map(key)) {
      MRMF_CHECK_KIND(Config, kv.second.IsMap() || kv.second.IsNull(), "config key '", key, "': expected a map");
      for (const auto& o : kv.second) {
        const std::string name = o.first.as<std::string>();
        cfg.model.options[name] = option_value(o.second, key + "." + name);
      }
      continue;
    }
    // A known leaf holding a list (e.g. data.reduce) is not descended into.
    collect_leaves(kv.second, key, out, cfg);
  }
}

template <class... Ts>
void require_one_of(const std::string& key, const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (v == a) return;
  std::string list;
  for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
  MRMF_THROW(Config, "config key '", key, "': '", v, "' is not one of ", list);
}


// One source of truth for the Neuron Inverter input layout: the loader (or
// the fused kernel) does the conversion, from data.layout; the model option
// `input_layout` only records it in the model spec and checkpoints. Either
// key may be given; both given and different is an error, not a silent
// label on data laid out the other way.
void resolve_ni_layout(RunConfig& c) {
  std::string from_model;
  auto it = c.model.options.find("input_layout");
  if (it != c.model.options.end()) {
    const std::string& v = it->second;
    if (v == "view" || v == "reinterpret_view" || v == "reinterpret")
      from_model = "reinterpret";
    else if (v == "transpose")
      from_model = "transpose";
    else
      MRMF_THROW(Config, "config key 'model.options.input_layout': '", v, "' is not one of transpose, view");
    it->second = from_model == "reinterpret" ? "view" : "transpose";
  }
  if (c.data.layout == "auto") {
    c.data.layout = from_model.empty() ? "transpose" : from_model;
  } else if (!from_model.empty() && from_model != c.data.layout) {
    MRMF_THROW(Config, "config keys 'data.layout' (", c.data.layout, ") and 'model.options.input_layout' (",
               it->second, ") disagree; set one of them");
  }
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }
// The optimizer computes in float32: a smaller positive value is 0 there
// (an lr of 1e-46 trained nothing; an eps of 1e-46 divided by zero).
void check_float32_positive(const char* key, double v) {
  MRMF_CHECK_KIND(Config, v >= static_cast<double>(std::numeric_limits<float>::min()), "config key '", key, "': ", v,
                  " is below float32's smallest normal number (", std::numeric_limits<float>::min(),
                  "), in which the optimizer computes; it would be 0 or lose its precision");
}

void validate(const RunConfig& c) {
  require_one_of("model.name", c.model.name, {"neuron_inverter", "cosmoflow"});
  require_one_of("data.format", c.data.format, {"neuron_inverter", "cosmoflow", "cosmoflow_lbann"});
  require_one_of("data.layout", c.data.layout, {"auto", "transpose", "reinterpret"});
  require_one_of("data.transform", c.data.transform, {"none", "log1p", "scale"});
  require_one_of("data.reduce_on", c.data.reduce_on, {"auto", "host", "device"});
  // log1p is for CosmoFlow's particle counts; Neuron Inverter frames are
  // z-scored voltages, and log1p of anything below -1 is NaN.
  MRMF_CHECK_KIND(Config, !(c.data.format == "neuron_inverter" && c.data.transform == "log1p"),
                  "config key 'data.transform': log1p needs non-negative data such as CosmoFlow's counts; Neuron "
                  "Inverter frames are z-scored (negative values give NaN) -- use none or scale");
  require_one_of("optimizer.name", c.optimizer.name, {"adam", "adamw", "sgd"});
  require_one_of("schedule.type", c.schedule.type, {"constant", "plateau", "piecewise", "cosine", "polynomial"});
  require_one_of("train.init_groups", c.train.init_groups, {"all", "bottom", "top", "resample"});
  require_one_of("train.freeze", c.train.freeze, {"", "bottom", "top"});
  // (Whether a BatchNorm layer has more than one value a channel at this
  // batch depends on the model: batchnorm_batch_problem, fusion/trainer.h.)
  MRMF_CHECK_KIND(Config, c.train.batch_size >= 1, "config key 'train.batch_size': must be at least 1, got ",
                  c.train.batch_size);
  MRMF_CHECK_KIND(Config, c.train.val_batch_size >= 0, "config key 'train.val_batch_size': must be >= 0");
  MRMF_CHECK_KIND(Config, c.stop.max_epochs >= 1, "config key 'stop.max_epochs': must be at least 1, got ",
                  c.stop.max_epochs);
  MRMF_CHECK_KIND(Config, c.stop.target_val_loss >= 0, "config key 'stop.target_val_loss': must be >= 0");
  MRMF_CHECK_KIND(Config, c.stop.plateau_threshold >= 0 && std::isfinite(c.stop.plateau_threshold),
                  "config key 'stop.plateau_threshold': must be finite and >= 0, got ", c.stop.plateau_threshold);
  MRMF_CHECK_KIND(Config, c.stop.plateau_threshold == 0 || c.stop.plateau_patience >= 1,
                  "config key 'stop.plateau_patience': must be at least 1 when stop.plateau_threshold is set, got ",
                  c.stop.plateau_patience);
  MRMF_CHECK_KIND(Config, c.stop.plateau_patience >= 0, "config key 'stop.plateau_patience': must be >= 0, got ",
                  c.stop.plateau_patience);
  MRMF_CHECK_KIND(Config, c.stop.min_epochs >= 0, "config key 'stop.min_epochs': must be >= 0, got ",
                  c.stop.min_epochs);
  require_one_of("stop.plateau_reference", c.stop.plateau_reference, {"previous", "best"});
  MRMF_CHECK_KIND(Config, finite_positive(c.optimizer.lr), "config key 'optimizer.lr': must be positive and finite, got ",
                  c.optimizer.lr);
  check_float32_positive("optimizer.lr", c.optimizer.lr);
  MRMF_CHECK_KIND(Config, c.optimizer.momentum >= 0 && c.optimizer.momentum < 1,
                  "config key 'optimizer.momentum': must be in [0, 1), got ", c.optimizer.momentum);
  MRMF_CHECK_KIND(Config, c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1, "config key 'optimizer.beta1': must be in [0, 1)");
  MRMF_CHECK_KIND(Config, c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1, "config key 'optimizer.beta2': must be in [0, 1)");
  MRMF_CHECK_KIND(Config, std::isfinite(c.optimizer.eps) && c.optimizer.eps > 0,
                  "config key 'optimizer.eps': must be positive and finite, got ", c.optimizer.eps);
  check_float32_positive("optimizer.eps", c.optimizer.eps);
  MRMF_CHECK_KIND(Config, std::isfinite(c.optimizer.weight_decay) && c.optimizer.weight_decay >= 0,
                  "config key 'optimizer.weight_decay': must be >= 0 and finite, got ", c.optimizer.weight_decay);
  MRMF_CHECK_KIND(Config, c.schedule.warmup_epochs >= 0, "config key 'schedule.warmup_epochs': must be >= 0");
  MRMF_CHECK_KIND(Config, c.schedule.warmup_steps >= 0, "config key 'schedule.warmup_steps': must be >= 0, got ",
                  c.schedule.warmup_steps);
  MRMF_CHECK_KIND(Config, c.schedule.warmup_epochs == 0 || c.schedule.warmup_steps == 0,
                  "config keys 'schedule.warmup_epochs' (", c.schedule.warmup_epochs, ") and 'schedule.warmup_steps' (",
                  c.schedule.warmup_steps, "): set one warmup, not both (the other to 0)");
  MRMF_CHECK_KIND(Config, c.schedule.plateau_factor > 0 && c.schedule.plateau_factor < 1,
                  "config key 'schedule.plateau_factor': must be in (0, 1), got ", c.schedule.plateau_factor);
  MRMF_CHECK_KIND(Config, c.schedule.plateau_patience >= 0, "config key 'schedule.plateau_patience': must be >= 0");
  MRMF_CHECK_KIND(Config, c.schedule.plateau_cooldown >= 0, "config key 'schedule.plateau_cooldown': must be >= 0, got ",
                  c.schedule.plateau_cooldown);
  MRMF_CHECK_KIND(Config, c.schedule.plateau_min_lr >= 0 && std::isfinite(c.schedule.plateau_min_lr),
                  "config key 'schedule.plateau_min_lr': must be >= 0, got ", c.schedule.plateau_min_lr);
  MRMF_CHECK_KIND(Config, c.schedule.end_lr >= 0 && std::isfinite(c.schedule.end_lr),
                  "config key 'schedule.end_lr': must be >= 0, got ", c.schedule.end_lr);
  MRMF_CHECK_KIND(Config, finite_positive(c.schedule.power), "config key 'schedule.power': must be positive, got ",
                  c.schedule.power);
  for (size_t i = 0; i < c.schedule.values.size(); ++i)
    MRMF_CHECK_KIND(Config, finite_positive(c.schedule.values[i]), "config key 'schedule.values[", i,
                    "]': learning rates must be positive and finite, got ", c.schedule.values[i]);
  for (size_t i = 0; i < c.schedule.boundaries.size(); ++i)
    MRMF_CHECK_KIND(Config, c.schedule.boundaries[i] >= 1 && (i == 0 || c.schedule.boundaries[i] > c.schedule.boundaries[i - 1]),
                    "config key 'schedule.boundaries': steps must be >= 1 and increasing, got ",
                    c.schedule.boundaries[i], " at position ", i);
  if (c.schedule.type == "piecewise") {
    MRMF_CHECK_KIND(Config, c.schedule.values.size() == c.schedule.boundaries.size() + 1,
                    "config key 'schedule.values': piecewise decay needs one more value than boundaries (",
                    c.schedule.boundaries.size(), " boundaries, ", c.schedule.values.size(), " values)");
  }
  if (c.schedule.type == "cosine" || c.schedule.type == "polynomial")
    MRMF_CHECK_KIND(Config, c.schedule.decay_steps >= 1, "config key 'schedule.decay_steps': must be at least 1 for ",
                    c.schedule.type, " decay");
  for (size_t i = 0; i < c.data.reduce.size(); ++i)
    MRMF_CHECK_KIND(Config, c.data.reduce[i] >= 1, "config key 'data.reduce[", i, "]': factors must be >= 1, got ",
                    c.data.reduce[i]);
  // Each prefetched batch is a buffer (pinned on a GPU run): a handful is plenty.
  MRMF_CHECK_KIND(Config, c.data.prefetch >= 1 && c.data.prefetch <= 64,
                  "config key 'data.prefetch': must be 1 to 64, got ", c.data.prefetch);
  MRMF_CHECK_KIND(Config, c.data.io_threads >= 1 && c.data.io_threads <= data::kMaxIoThreads,
                  "config key 'data.io_threads': must be 1 to ", data::kMaxIoThreads, ", got ", c.data.io_threads);
  MRMF_CHECK_KIND(Config, c.data.transform != "scale" || !c.data.scale.empty(),
                  "config key 'data.scale': transform 'scale' needs per-channel factors");
  MRMF_CHECK_KIND(Config, c.train.checkpoint_every >= 0, "config key 'train.checkpoint_every': must be >= 0");
  MRMF_CHECK_KIND(Config, c.train.checkpoint_every_steps >= 0,
                  "config key 'train.checkpoint_every_steps': must be >= 0 (0: off), got ", c.train.checkpoint_every_steps);
  MRMF_CHECK_KIND(Config, c.train.max_steps_per_epoch >= 0, "config key 'train.max_steps_per_epoch': must be >= 0 "
                  "(0: the whole shard), got ", c.train.max_steps_per_epoch);
  // In MB, shifted to bytes: bounded well inside int64 (2^30 MB = 1 PiB).
  MRMF_CHECK_KIND(Config, c.data.cache_max_mb >= 0 && c.data.cache_max_mb <= (int64_t{1} << 30),
                  "config key 'data.cache_max_mb': must be 0 (automatic) to 2^30, got ", c.data.cache_max_mb);
  MRMF_CHECK_KIND(Config, c.data.max_train_samples >= 0, "config key 'data.max_train_samples': must be >= 0 (0: all), got ",
                  c.data.max_train_samples);
  MRMF_CHECK_KIND(Config, std::isfinite(c.stop.target_val_loss), "config key 'stop.target_val_loss': must be finite");
  for (size_t i = 0; i < c.data.scale.size(); ++i)
    // The kernel multiplies in float32: 1e39 passed and made every input inf.
    MRMF_CHECK_KIND(Config, std::isfinite(c.data.scale[i]) && std::fabs(c.data.scale[i]) <= 3.4028234663852886e38,
                    "config key 'data.scale[", i, "]': must be finite in float32 (|x| <= 3.4e38), got ",
                    c.data.scale[i]);
  for (size_t i = 0; i < c.data.scale.size(); ++i)
    MRMF_CHECK_KIND(Config, c.data.scale[i] != 0, "config key 'data.scale[", i, "]': 0 erases channel ", i,
                    " (every input value becomes 0)");
  MRMF_CHECK_KIND(Config, c.train.bucket_mb >= 1, "config key 'train.bucket_mb': must be at least 1");
  MRMF_CHECK_KIND(Config, c.train.precise_bn_batches >= 0, "config key 'train.precise_bn_batches': must be >= 0 "
                  "(0: off), got ", c.train.precise_bn_batches);
  // Each OpenMP thread has its own stack: 100000 of them overflow memory (a crash, not an error).
  MRMF_CHECK_KIND(Config, c.runtime.threads >= 0 && c.runtime.threads <= kMaxThreads,
                  "config key 'runtime.threads': must be 0 (all cores) to ", kMaxThreads, ", got ", c.runtime.threads);
  MRMF_CHECK_KIND(Config, c.runtime.cudnn_workspace_mb >= 0 && c.runtime.cudnn_workspace_mb <= (int64_t{1} << 30),
                  "config key 'runtime.cudnn_workspace_mb': must be 0 to 2^30, got ", c.runtime.cudnn_workspace_mb);
}

std::string emit(const RunConfig& c) {
  YAML::Node root;
  for (const auto& f : schema()) {
    // Walk/create the nested maps for the dotted key.
    std::vector<std::string> parts;
    std::stringstream ss(f.key);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    YAML::Node leaf;
    f.write(c, leaf);
    YAML::Node parent = root[parts[0]];
    for (size_t i = 1; i + 1 < parts.size(); ++i) parent = parent[parts[i]];
    parent[parts.back()] = leaf;
  }
  for (const auto& [k, v] : c.model.options) root["model"]["options"][k] = v;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

}  // namespace

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& f : schema()) k.push_back(f.key);
    return k;
  }();
  return keys;
}

std::string yaml_quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  MRMF_CHECK_KIND(Config, eq != std::string::npos && eq > 0, "--set '", assignment, "': expected key=value");
  MRMF_CHECK_KIND(Config, assignment[eq - 1] != '.', "--set '", assignment, "': the key ends with '.'");
  // An alias sets its key (so that it overrides the file's value of it), and
  // the file's spelling through an alias gives way to the --set.
  const std::string key = canonical_key(assignment.substr(0, eq)), value = assignment.substr(eq + 1);
  for (const auto& [alias, target] : key_aliases()) {
    if (target != key) continue;
    const auto dot = alias.find('.');
    const YAML::Node& lookup = root;  // const: a lookup must not add the section
    const YAML::Node present = lookup[alias.substr(0, dot)];
    if (!present || !present.IsMap()) continue;
    YAML::Node section = root[alias.substr(0, dot)];
    section.remove(alias.substr(dot + 1));
  }
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) {
    MRMF_CHECK_KIND(Config, !p.empty(), "--set '", assignment, "': empty component in key '", key, "'");
    parts.push_back(p);
  }
  YAML::Node parsed;
  try {
    parsed = load_yaml_document(value);
  } catch (const YAML::Exception& e) {
    MRMF_THROW(Config, "--set '", assignment, "': cannot parse the value: ", e.msg);
  }
  // Checked as a file is: a key given twice, an alias that refers to itself
  // (which every later walk would follow until the stack overflows).
  check_unique_keys(parsed, "--set '" + assignment + "'", key);
  // yaml-cpp's operator[] on a temporary would not write through: keep handles.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsMap()) {
      MRMF_CHECK_KIND(Config, !next.IsDefined() || next.IsNull(), "--set '", assignment, "': '", parts[i],
                      "' is not a section");
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = parsed.IsNull() ? YAML::Node(value) : parsed;
}

namespace {
void check_unique_keys_at(const YAML::Node& node, const std::string& origin, const std::string& path, int depth,
                          int64_t& visited) {
  // An alias may refer to its own anchor (a: &x [*x]): the node graph then
  // has a cycle, which every recursive walk would follow until the stack
  // overflows. No configuration is nested this deep.
  MRMF_CHECK_KIND(Config, depth <= 32, origin, ": '", path.substr(0, 60),
                  "...' is nested more than 32 levels deep (a YAML alias that refers to itself?)");
  // Aliases of aliases multiply (9 levels of 10 make 10^9 nodes from a few
  // lines): every walk would take hours. No configuration is this large.
  MRMF_CHECK_KIND(Config, ++visited <= 100000, origin,
                  ": more than 100000 values once its YAML aliases are expanded (aliases of aliases?), at '",
                  path.substr(0, 60), "'");
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      check_unique_keys_at(node[i], origin, path + "[" + std::to_string(i) + "]", depth + 1, visited);
    return;
  }
  if (!node.IsMap()) return;
  std::set<std::string> seen;
  for (const auto& kv : node) {
    MRMF_CHECK_KIND(Config, kv.first.IsScalar(), origin, ": a key ",
                    path.empty() ? std::string() : "under '" + path + "' ", "is a list or a map; keys are names");
    const std::string key = kv.first.Scalar(), full = path.empty() ? key : path + "." + key;
    MRMF_CHECK_KIND(Config, seen.insert(key).second, origin, ": key '", full,
                    "' is given twice (only one of them would be used)");
    check_unique_keys_at(kv.second, origin, full, depth + 1, visited);
  }
}
}  // namespace

void check_unique_keys(const YAML::Node& node, const std::string& origin, const std::string& path) {
  int64_t visited = 0;
  check_unique_keys_at(node, origin, path, 0, visited);
}

namespace {
// Where each document starts; nothing else of the event stream is needed.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& m) override { starts.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};
}  // namespace

YAML::Node load_yaml_document(const std::string& text) try {
  // Documents are counted by hand, three at most: yaml-cpp 0.7's LoadAll
  // loops for ever on a stray ',' at the top level (`--set
  // data.reduce=[2,2,2],`), each round an empty document that consumes
  // nothing, until memory runs out (jbeder/yaml-cpp#1040). A document that
  // starts where the one before started is that stray token.
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts h;
  while (h.starts.size() < 3 && parser.HandleNextDocument(h)) {
    const size_t n = h.starts.size();
    if (n >= 2 && h.starts[n - 1].pos == h.starts[n - 2].pos) {
      const YAML::Mark& m = h.starts[n - 1];
      const char c = m.pos >= 0 && static_cast<size_t>(m.pos) < text.size() ? text[static_cast<size_t>(m.pos)] : '?';
      throw YAML::ParserException(m, std::string("unexpected '") + c + "' (a stray character after the value?)");
    }
  }
  if (h.starts.size() > 1)
    throw YAML::ParserException(YAML::Mark(), "it holds " + std::to_string(h.starts.size()) +
                                                  (h.starts.size() > 2 ? " or more" : "") +
                                                  " YAML documents (separated by '---'); a configuration is one, and "
                                                  "the others would be ignored");
  return YAML::Load(text);
}
#ifdef MRMF_YAML_DEPTH_GUARD
catch (const YAML::DeepRecursion& e) {
  // yaml-cpp's own text for it is "bad file"; depth() is its limit.
  throw YAML::ParserException(e.mark, "values nested more than " + std::to_string(e.depth()) +
                                          " levels deep, past the YAML reader's limit; a configuration needs a few");
}
#else
catch (const YAML::ParserException&) {
  throw;
}
#endif

RunConfig parse_run_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                           const std::string& origin) {
  YAML::Node root;
  try {
    root = load_yaml_document(yaml_text);
  } catch (const YAML::ParserException& e) {
    MRMF_THROW(Config, origin, ":", e.mark.line + 1, ": invalid YAML: ", e.msg);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  MRMF_CHECK_KIND(Config, root.IsMap(), origin, ": the configuration must be a YAML map of sections");
  check_unique_keys(root, origin);
  for (const auto& o : overrides) apply_override(root, o);

  RunConfig cfg;
  std::vector<std::pair<std::string, YAML::Node>> leaves;
  collect_leaves(root, "", leaves, cfg);
  std::map<std::string, std::string> seen;  // canonical key -> how it was written
  // Who set a key: the --set that wrote it or one of its sections, else the file.
  const auto set_by = [&](const std::string& written) {
    for (auto o = overrides.rbegin(); o != overrides.rend(); ++o) {
      const std::string k = o->substr(0, o->find('='));
      if (written == k || written.rfind(k + ".", 0) == 0) return "--set '" + *o + "'";
    }
    return origin;
  };
  for (const auto& [written, node] : leaves) {
    const std::string key = canonical_key(written);
    const auto [at, fresh] = seen.emplace(key, written);
    MRMF_CHECK_KIND(Config, fresh, origin, ": config keys '", at->second, "' and '", written,
                    "' are the same setting; give one of them");
    auto it = std::find_if(schema().begin(), schema().end(), [&](const Field& f) { return f.key == key; });
    if (it == schema().end()) {  // a section given a value instead of its keys?
      const auto sub = std::find_if(schema().begin(), schema().end(),
                                    [&](const Field& f) { return f.key.rfind(key + ".", 0) == 0; });
      // `train:` or `train: {}` with nothing below keeps the defaults
      if (sub != schema().end() && (node.IsNull() || node.IsMap())) continue;
      MRMF_CHECK_KIND(Config, sub == schema().end(), origin, ": config key '", written,
                      "' is a section: expected a map of its keys (such as ", sub->key, "), got a ",
                      node.IsSequence() ? "list" : "value");
    }
    MRMF_CHECK_KIND(Config, it != schema().end(), set_by(written), ": unknown config key '", written, "'",
                    suggestion(written));
    if (node.IsNull()) {  // `key:` with no value: a value forgotten, not a request for the default
      YAML::Node def;
      it->write(RunConfig{}, def);
      YAML::Emitter e;
      e << YAML::Flow << def;
      MRMF_THROW(Config, origin, ": config key '", written, "' has no value; write one, or leave the key out for ",
                 "its default (", e.c_str(), ")");
    }
    it->read(cfg, node);
  }
  resolve_ni_layout(cfg);
  validate(cfg);
  cfg.text = emit(cfg);
  for (const auto& kv : seen) cfg.given.push_back(kv.first);
  return cfg;
}

std::vector<std::string> unused_settings(const RunConfig& c) {
  const std::string& opt = c.optimizer.name;
  const std::string& sch = c.schedule.type;
  // Key -> whether the configuration's choice reads it, and whose choice it is.
  const auto used = [&](const std::string& key) -> std::pair<bool, std::string> {
    if (key == "optimizer.beta1" || key == "optimizer.beta2" || key == "optimizer.eps") return {opt != "sgd", opt};
    if (key == "optimizer.momentum" || key == "optimizer.nesterov") return {opt == "sgd", opt};
    if (key.rfind("schedule.plateau_", 0) == 0) return {sch == "plateau", "schedule " + sch};
    if (key == "schedule.boundaries" || key == "schedule.values") return {sch == "piecewise", "schedule " + sch};
    if (key == "schedule.decay_steps" || key == "schedule.end_lr")
      return {sch == "cosine" || sch == "polynomial", "schedule " + sch};
    if (key == "schedule.power") return {sch == "polynomial", "schedule " + sch};
    return {true, ""};
  };
  std::vector<std::string> out;
  for (const auto& key : c.given) {
    const auto [yes, who] = used(key);
    if (!yes) out.push_back(key + ": " + who + " does not use it");
  }
  return out;
}

void check_user_config(const RunConfig& c, bool notice_unused) {
  // Factors without the transform that applies them were silently ignored.
  // (Not in validate(): configurations stored in checkpoints by earlier
  // versions may hold such factors, and must still evaluate and resume.)
  MRMF_CHECK_KIND(Config, c.data.scale.empty() || c.data.transform == "scale",
                  "config key 'data.scale': per-channel factors are given but data.transform is '", c.data.transform,
                  "', so they would be ignored; set data.transform=scale, or drop data.scale");
  // A notice, not an error: a run cut short on purpose (max_epochs 2) and
  // resumed later with more epochs keeps its min_epochs.
  if (c.stop.min_epochs > c.stop.max_epochs)
    log::info(
        "notice: stop.min_epochs {} is more than stop.max_epochs {}: the epoch guard stops this run before the "
        "plateau rule may",
        c.stop.min_epochs, c.stop.max_epochs);
  const auto unused = notice_unused ? unused_settings(c) : std::vector<std::string>{};
  if (!unused.empty()) {
    std::string list;
    for (const auto& u : unused) list += "\n  " + u;
    log::info("configuration keys set but not read by the chosen optimizer or learning-rate schedule:{}", list);
  }
}

std::string read_config_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  MRMF_CHECK_KIND(Config, !ec || st.type() == fs::file_type::not_found, "cannot read ", what, " '", path,
                  "': ", ec.message());  // e.g. too many levels of symbolic links
  MRMF_CHECK_KIND(Config, fs::exists(st), "cannot read ", what, " '", path, "': no such file");
  MRMF_CHECK_KIND(Config, !fs::is_directory(st), "cannot read ", what, " '", path,
                  "': it is a folder, expected a YAML file");
  MRMF_CHECK_KIND(Config, fs::is_regular_file(st) || fs::is_fifo(st) || fs::is_character_file(st), "cannot read ", what,
                  " '", path, "': a socket or block device, expected a YAML file");
  // A pipe (`--config <(...)`, /dev/stdin) is read too; a FIFO no process
  // writes to blocked the open for ever (a hang SIGTERM did not end): opened
  // without blocking, it must have a writer within kWriterWait.
  constexpr int kWriterWaitMs = 5000;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (fs::is_fifo(st) ? O_NONBLOCK : 0));
  MRMF_CHECK_KIND(Config, fd >= 0, "cannot read ", what, " '", path, "': ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string text;
  if (fs::is_fifo(st)) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, kWriterWaitMs);
    MRMF_CHECK_KIND(Config, ready > 0, "cannot read ", what, " '", path, "': a FIFO that no process wrote to within ",
                    kWriterWaitMs / 1000, " s");
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    MRMF_CHECK_KIND(Config, n >= 0, "cannot read ", what, " '", path, "': ", std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    MRMF_CHECK_KIND(Config, text.size() <= (size_t{64} << 20), "cannot read ", what, " '", path,
                    "': more than 64 MiB, not a configuration");
  }
  return text;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = path.empty() ? std::string() : read_config_file(path, "config file");
  RunConfig cfg = parse_run_config(text, overrides, path.empty() ? "<defaults>" : path);
  check_user_config(cfg);
  return cfg;
}

uint64_t RunConfig::hash() const { return fnv1a64(text); }

namespace {
void flatten(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) flatten(kv.second, (prefix.empty() ? "" : prefix + ".") + kv.first.as<std::string>(), out);
    return;
  }
  // One line per value: `e << YAML::Flow << node` leaves a Node's own
  // (block) style in place; the emitter's formats are what apply.
  YAML::Emitter e;
  e.SetSeqFormat(YAML::Flow);
  e.SetMapFormat(YAML::Flow);
  e << n;
  out[prefix] = e.c_str();
}
}  // namespace

std::vector<std::string> config_differences(const std::string& a_text, const std::string& b_text) {
  std::map<std::string, std::string> a, b;
  flatten(YAML::Load(a_text), "", a);
  flatten(YAML::Load(b_text), "", b);
  std::vector<std::string> out;
  auto ia = a.begin();
  auto ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      out.push_back(ia->first + ": " + ia->second + " -> (unset)");
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      out.push_back(ib->first + ": (unset) -> " + ib->second);
      ++ib;
    } else {
      if (ia->second != ib->second) out.push_back(ia->first + ": " + ia->second + " -> " + ib->second);
      ++ia;
      ++ib;
    }
  }
  return out;
}

}  // namespace mrmf
