// Run configuration: YAML files plus `--set key=value` overrides, validated
// against a schema before any compute.
//
// Every key has a dotted path (e.g. `train.batch_size`), a type and a
// default. Unknown keys, wrong types and impossible values are reported with
// the offending key (and a suggestion for misspelled keys) as ErrorKind::Config,
// which the CLI maps to exit code 2.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace mrmf {

struct OptimizerConfig {
  std::string name = "adam";  // adam | adamw | sgd
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.9;
  bool nesterov = false;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | plateau | piecewise | cosine | polynomial
  int64_t warmup_epochs = 0;      // lr * (epoch + 1) / W for the first W epochs
  // lr * (step + 1) / S for the first S optimizer steps of the run (not with
  // warmup_epochs). Why steps: a stage that starts from transferred weights
  // with fresh Adam moments takes steps of ~lr per parameter at once; a ramp
  // shorter than an epoch (experiment.finetune_overrides) softens that.
  int64_t warmup_steps = 0;
  // ReduceLROnPlateau on the validation loss
  double plateau_factor = 0.11;
  int64_t plateau_patience = 8;
  int64_t plateau_cooldown = 2;
  double plateau_min_lr = 0.0;
  // piecewise-constant decay in optimizer steps
  std::vector<int64_t> boundaries;
  std::vector<double> values;
  // cosine / polynomial decay over this many steps
  int64_t decay_steps = 0;
  double end_lr = 0.0;
  double power = 1.0;
};

struct StopConfig {
  int64_t max_epochs = 10;
  double target_val_loss = 0.0;  // 0: disabled
  // Loss-plateau rule (MRMF paper, Sec. 3.2): stop when the train-loss
  // decrease is below `threshold` for `patience` consecutive epochs. 0: disabled.
  double plateau_threshold = 0.0;
  int64_t plateau_patience = 0;
  int64_t min_epochs = 0;  // the plateau rule cannot stop the run before this many epochs (the target can)
  // What an epoch's reduction is measured from: "previous" (the epoch
  // before, the paper's rule) or "best" (the lowest loss so far;
  // fusion/stop_rules.h says why).
  std::string plateau_reference = "previous";
};

struct DataConfig {
  std::string format = "neuron_inverter";  // neuron_inverter | cosmoflow | cosmoflow_lbann
  std::string path;                        // NI: the .h5 file; CosmoFlow: folder with train/ val/ test/
  std::string train_files, val_files, test_files;  // CosmoFlow: optional globs / comma lists
  std::string layout = "auto";             // NI: transpose | reinterpret (the original's view quirk);
                                           // auto: model.options.input_layout, else transpose
  std::string transform = "none";          // none | log1p | scale
  std::vector<double> scale;               // per-channel factors for transform = scale
  std::vector<int64_t> reduce;             // resolution reduction factor per spatial axis ([] = original)
  bool cache = true;                       // keep reduced data in memory after the first epoch
  // Where coarse data is made on a GPU run: "device" -- raw samples go to the
  // GPU and the fused kernel reduces them there every batch; "host" -- the
  // loader reduces them on the CPU once and (with cache) keeps the reduced
  // float32 samples in host memory, the offline reducer's math; "auto" --
  // device on a GPU, host on the CPU (the only choice there).
  std::string reduce_on = "auto";
  int64_t prefetch = 2;                    // batches buffered by the I/O thread
  int64_t io_threads = 1;                  // > 1: converter threads beside the I/O thread (CPU; data/loader.h)
  int64_t max_train_samples = 0;           // 0: all
  int64_t cache_max_mb = 0;                // the process's sample-cache budget; 0: RAM / 4 / ranks on the node
  bool memory_map = true;                  // CosmoFlow: map contiguous files (data/loader.h)
};

struct ModelConfig {
  std::string name = "neuron_inverter";  // neuron_inverter | cosmoflow
  std::string variant = "";              // cosmoflow: mrmf | lbann2019 | mlperf
  std::map<std::string, std::string> options;
};

struct TrainConfig {
  int64_t batch_size = 512;  // local, per rank
  int64_t val_batch_size = 0;  // 0: same as batch_size
  uint64_t seed = 1;
  bool deterministic = false;
  int64_t checkpoint_every = 1;  // epochs; 0: only at the end
  int64_t checkpoint_every_steps = 0;  // also every N steps inside an epoch (0: off); resumes mid-epoch
  int64_t max_steps_per_epoch = 0;  // 0: the whole shard
  int64_t bucket_mb = 25;   // gradient allreduce bucket size
  // > 0: before each validation, re-estimate the BN running statistics on
  // this many training batches with the current weights ("precise BN",
  // fusion/bn_recalibrate.h); its time counts as validation time.
  int64_t precise_bn_batches = 0;
  std::string init;         // checkpoint to start from (--init)
  // all | bottom | top | resample: the whole model of a checkpoint at another
  // resolution, its top resampled (fusion/resample_top.h)
  std::string init_groups = "all";
  std::string freeze = "";  // "" | bottom | top
};

struct RuntimeConfig {
  std::string device = "";  // "" = $MRMF_DEVICE or auto
  int64_t threads = 0;
  bool allow_tf32 = true;       // GPU convolutions may use TF32 tensor cores (PyTorch's default)
  bool cudnn_benchmark = true;  // GPU convolutions: time cuDNN's algorithms once per shape
  int64_t cudnn_workspace_mb = 4096;  // cap for cuDNN convolution workspaces
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  StopConfig stop;
  RuntimeConfig runtime;
  std::string text;  // the effective configuration as YAML (for checkpoints and summaries)
  // The keys the YAML text and the overrides set (canonical spelling,
  // sorted); not part of `text`: a key set to its default is the same run.
  std::vector<std::string> given;
  uint64_t hash() const;  // FNV-1a of `text`: ranks must agree on it
};

// Loads a YAML file (may be empty for all defaults), applies overrides
// ("train.epochs=5"), validates and returns the typed configuration.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides);
// The text of a configuration file; `what` names it in errors ("config file",
// "the base of X"). A regular file, a character device or a pipe with a
// writer (`--config <(...)`); a FIFO no process writes to within 5 s is
// refused (its open blocked for ever), as are folders and link loops.
std::string read_config_file(const std::string& path, const std::string& what);
// Rules for configurations a user gives (load_run_config, experiment
// files), not for those stored in checkpoints by earlier versions.
// `notice_unused`: say unused_settings() (off where a rung may choose
// another optimizer or schedule that reads them).
void check_user_config(const RunConfig& c, bool notice_unused = true);
// The given keys that the chosen optimizer or schedule does not read, each
// with why ("optimizer.momentum: adam does not use it"). Not errors: an
// experiment's base may set both optimizers' keys for its rungs to choose
// from; check_user_config says them as a notice.
std::vector<std::string> unused_settings(const RunConfig& c);
// Same from YAML text (tests, experiments that embed run configs).
RunConfig parse_run_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                           const std::string& origin = "<string>");

// Applies `key=value` to a YAML tree (creating maps on the way); the value
// is parsed as YAML, so lists ("[2, 2]") and numbers work. Exposed for the
// experiment config, which nests run configs.
void apply_override(YAML::Node& root, const std::string& assignment);
// `text` as a YAML single-quoted scalar, for a flag's value (a path) made
// into an override: parsed, it is the string as given, where a ' #', ': ',
// a leading '*' or '[' would otherwise make it a comment, map, alias or list.
std::string yaml_quoted(const std::string& text);
// A key given twice in one map of a YAML file is an error naming it: yaml-cpp
// keeps both and every lookup sees only the first, so the second would be
// silently ignored.
// Also nesting deeper than any configuration (a YAML alias that refers to
// itself makes a cycle): an error instead of a stack overflow. Call it on a
// freshly loaded document before anything else walks it.
void check_unique_keys(const YAML::Node& node, const std::string& origin, const std::string& path = "");
// The one YAML document of `text` (null for none); throws YAML::ParserException
// for invalid YAML and for more than one document (YAML::Load would take the
// first and silently drop the rest).
YAML::Node load_yaml_document(const std::string& text);

// Every valid dotted key of a run configuration (for --help and suggestions).
const std::vector<std::string>& run_config_keys();

// The keys whose values differ between two effective configurations
// (RunConfig::text), each as "key: <a> -> <b>" ("(unset)" where one lacks
// it), in key order -- so that a refused --resume says what changed.
std::vector<std::string> config_differences(const std::string& a_text, const std::string& b_text);

}  // namespace mrmf
