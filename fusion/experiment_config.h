// The MRMF experiment configuration: a base run configuration plus the
// methods to compare, the resolution ladder, the stop rules per role and
// stage, and the seeds.
//
//   run: {...}                      # a run configuration (fusion/config.h), or
//   base: configs/neuron_inverter_cpu.yaml   # or another experiment file: its run
//                                   # configuration and every experiment key not set here
//                                   # (a key set here replaces the inherited value whole)
//   experiment:
//     methods: [baseline, mrt, mrmf1, mrmf2, concurrent]
//     seeds: [1, 2, 3]
//     target_val_loss: 0.08         # every method trains its final stage to this
//     max_epochs: 40                # guard for baseline, MRT and fine-tuning
//     ladder: [[4], [2], [1]]       # reduction factors, coarsest first, original last
//     one_fusion_coarse: [2]        # coarse resolution of mrmf1 / mrt / concurrent (default: ladder[-2])
//     coarse_stop: {threshold: 0.002, patience: 2, max_epochs: 20}   # also min_epochs (default 0) and
//                                   # reference: previous (the paper's) or best (fusion/stop_rules.h)
//     dense_stop:  {threshold: 0.005, patience: 1, max_epochs: 10}
//     stages:                       # optional per-stage overrides, first fusion stage first
//       - {dense_stop: {threshold: 0.01}}
//     resolution_overrides: {"4": ["train.batch_size=512", "optimizer.lr=2e-3"]}
//                                   # a rung as the ladder writes it; one factor on every axis
//                                   # may be written once or per axis ("2" or "2,2,2")
//     finetune_overrides: ["schedule.warmup_steps=128"]   # run keys for the stage that fine-tunes a
//                                   # transferred / fused model (MRT, MRMF, concurrent), after the
//                                   # original rung's resolution_overrides; not the baseline
//     optimizer_at_fusion: reset    # or keep: Adam moments travel with their blocks
//     mrt_top: fresh                # MRT's top group: fresh (the paper's), or resample: carried over,
//                                   # the layers sized by the flattened features resampled to the
//                                   # target resolution (fusion/resample_top.h; not the paper's MRT)
//     shared_init: false            # true: each stage's dense model starts from the coarse model's
//                                   # initial weights (same seed: identical convolutions)
//     bn_recalibration_batches: 0   # > 0: re-estimate BN statistics of a fused/transferred model
//                                   # on this many training batches first (fusion/bn_recalibrate.h)
//     stage_checkpoints: true       # each stage writes checkpoint.h5 every epoch, so that --resume
//                                   # continues an interrupted run inside its stage (false: the run restarts)
//     concurrent_times: []          # [t_dense, t_coarse] epoch times; empty = measured by a probe
//     probe_steps: 3
//     concurrent_overtime: false    # true: the concurrent group done first trains on (past its stop
//                                   # rule and guard) until the other is done, instead of waiting;
//                                   # its epoch count then depends on timing (not bit-reproducible)
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mrmf {

struct StopRule {
  double threshold = 0;  // loss-plateau threshold epsilon (0: off)
  int64_t patience = 0;  // T_p
  int64_t max_epochs = 20;  // the guard
  int64_t min_epochs = 0;   // the plateau rule cannot stop the stage earlier (stop.min_epochs)
  std::string reference = "previous";  // or "best" (stop.plateau_reference, fusion/stop_rules.h)
};

struct StageStops {
  StopRule coarse, dense;
};

using Resolution = std::vector<int64_t>;  // per spatial axis; {1} = original
std::string resolution_key(const Resolution& r);  // "2", "2,2,2", "1"
bool is_original(const Resolution& r);

struct ExperimentConfig {
  std::string run_yaml;                 // the base run configuration
  std::vector<std::string> run_sets;    // --set overrides for every run
  std::vector<std::string> methods{"baseline", "mrt", "mrmf1", "mrmf2"};
  std::vector<uint64_t> seeds{1};
  double target_val_loss = 0;
  int64_t max_epochs = 40;
  std::vector<Resolution> ladder{{4}, {2}, {1}};
  Resolution one_fusion_coarse;         // empty: ladder[-2]
  StopRule coarse_stop{0.002, 2, 20}, dense_stop{0.005, 1, 10};
  std::vector<StageStops> stages;       // per fusion stage (defaults filled in)
  std::map<std::string, std::vector<std::string>> resolution_overrides;
  std::vector<std::string> finetune_overrides;
  std::string optimizer_at_fusion = "reset";
  std::string mrt_top = "fresh";  // or "resample" (fusion/resample_top.h)
  // false: the dense model of a stage draws its own initial weights (seed +
  // 1000 x stage); true: the same seed as the run, so its convolutions start
  // identical to the coarse model's and the dense top is trained on features
  // that began where the coarse bottom's did.
  bool shared_init = false;
  int64_t bn_recalibration_batches = 0;  // 0: the paper's method, BN statistics travel unchanged
  // Stages write checkpoints (train.checkpoint_every; the pre-fusion ones are
  // removed when their run has finished) so that `mrmf experiment --resume`
  // continues an interrupted run where its last checkpoint was.
  bool stage_checkpoints = true;
  std::vector<double> concurrent_times;
  int64_t probe_steps = 3;
  bool concurrent_overtime = false;

  // The ladder a method uses (coarsest first, original last).
  std::vector<Resolution> ladder_for(const std::string& method) const;
  StageStops stops_for_stage(size_t stage) const;
};

// Whether `m` is a method's one spelling: baseline, mrt, concurrent, or
// mrmfN (N from 1, no leading zero).
bool is_method_name(const std::string& m);
// A Config error (naming `who`) unless m is a method this ladder runs.
void check_method_fits_ladder(const ExperimentConfig& c, const std::string& m, const std::string& who);

// Whether a resolution_overrides key names rung r: as resolution_key(r)
// writes it, or as the same factor on every axis written once or per axis
// ("2" and "2,2,2"; "1" and "1,1,1"), which data.reduce applies alike.
bool names_rung(const std::string& key, const Resolution& r);
// The resolution_overrides of rung r (nullptr: none); at most one key names
// a rung (parse_experiment_config refuses two).
const std::vector<std::string>* rung_overrides(const ExperimentConfig& c, const Resolution& r);

// Every key of the `experiment:` section (docs/configuration.md describes
// each; a unit test keeps the two in step).
const std::set<std::string>& experiment_keys();

// Parses an experiment file (plus `--set experiment.x=...` or run-key overrides:
// keys starting with "experiment." go to this section, others to every run).
// Validates everything -- including a trial parse of the run configuration at
// every resolution -- before any training starts.
ExperimentConfig load_experiment_config(const std::string& path, const std::vector<std::string>& overrides);
ExperimentConfig parse_experiment_config(const std::string& text, const std::vector<std::string>& overrides,
                                         const std::string& origin, const std::string& base_dir = ".");

}  // namespace mrmf
