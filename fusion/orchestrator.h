// The MRMF orchestrator: runs one training method end to end.
//
//   baseline    the original model on original data until the target
//   mrt         coarse model until its stop rule; its bottom group (with BN
//               statistics) into a fresh original-resolution model; to the target
//   mrmfN       N fusion stages over the last N+1 rungs of the ladder: in each,
//               M_c (fresh in stage 0, the previous fused model after) trains on
//               the coarse rung and a fresh M_d on the dense rung, each until
//               its stop rule; M_f = bottom(M_c) + top(M_d); finally M_f is
//               fine-tuned on original data to the target
//   concurrent  mrmf1 with M_c and M_d trained at the same time on two groups
//               of ranks sized t_d/(t_d+t_c) : t_c/(t_d+t_c); the groups then
//               exchange their blocks so every rank holds M_f (sequential with
//               a notice when there are fewer than two ranks)
// Stages write checkpoints (stage_checkpoints) so that an interrupted run
// can be resumed inside a stage; the pre-fusion ones are removed once the run
// has finished (the final stage's, the trained model, is kept).
// With bn_recalibration_batches > 0, a stage that starts from a fused or
// transferred model first re-estimates its BN running statistics at its own
// resolution (fusion/bn_recalibrate.h); that time counts in the stage's.
// Each stage is a Trainer with its own run configuration (resolution,
// per-resolution overrides, seed, stop rule) writing its metrics under
// <out>/<method>/seed<k>/<stage>/.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "fusion/experiment_config.h"
#include "fusion/trainer.h"

namespace mrmf {

struct StageResult {
  std::string name;        // "coarse@2", "dense@1", "finetune@1", "baseline@1", "stage1/coarse@4", ...
  std::string role;        // baseline | coarse | dense | finetune | concurrent
  std::string resolution;  // resolution_key
  int64_t epochs = 0;
  double time_s = 0;       // wall time of the stage on this rank's group (set-up + training + validation)
  double final_val_loss = 0;
  std::string stop_reason;
  int ranks = 1;           // ranks that trained this stage
  std::vector<EpochRecord> history;
};

struct MethodRun {
  std::string method;
  uint64_t seed = 0;
  std::vector<StageResult> stages;
  double total_s = 0;
  double final_val_loss = 0;
  bool reached_target = false;
  int64_t epochs_before_fusion = 0, epochs_after_fusion = 0;
  double fusion_s = 0;  // time spent building fused models and exchanging blocks
  // Concurrent training's split probe: the steps of both models timed to size
  // the rank groups (0 when concurrent_times gives the epoch times). Part of
  // total_s: a method that must measure before it starts pays for it.
  double split_probe_s = 0;
  // True when the pre-fusion stages ran at the same time on two rank groups
  // (their wall time is the slower one's, not the sum).
  bool concurrent_groups = false;
  // The build that finished the run (core/version.h; "" in the states of
  // older versions). Provenance only: never compared.
  std::string mrmf;
};

// Concurrent training's parameter exchange: ranks [0, coarse_root) trained
// the dense model, ranks [coarse_root, world) the coarse one. Each rank
// passes the model it trained (the other is built here from its spec); the
// two groups' roots broadcast their flat buffers to the world, and every rank
// returns the same fused model.
std::unique_ptr<Model> exchange_and_fuse(Communicator& world, int coarse_root, std::unique_ptr<Model> mine,
                                         const ModelSpec& coarse_spec, const ModelSpec& dense_spec, Device device,
                                         uint64_t seed);

class Orchestrator {
 public:
  Orchestrator(ExperimentConfig cfg, Communicator& world, Device device, std::string out_dir);
  // Runs one method with one seed. Without `resume` the run's folder is
  // cleared first; with it, stages that an interrupted attempt left
  // checkpoints for continue from them (finished stages are restored, not
  // retrained) -- the result equals an uninterrupted run's in deterministic
  // CPU mode.
  MethodRun run(const std::string& method, uint64_t seed, bool resume = false);
  // Empties the run's folder (rank 0; every rank waits): what run() does
  // before a run that does not resume.
  void clear_run(const std::string& method, uint64_t seed) const;
  // Once a finished run is recorded: its pre-fusion stages' checkpoints were
  // only there to resume it (the final stage's, the trained model, stays).
  void drop_stage_checkpoints(const std::string& method, uint64_t seed) const;

  // The run configuration of one stage (exposed for tests).
  // `finetune`: the stage that fine-tunes a transferred or fused model (experiment.finetune_overrides apply).
  RunConfig stage_config(const Resolution& r, uint64_t seed, const StopRule& stop, double target,
                         bool finetune = false) const;
  // Ranks for the dense group when splitting `world` ranks by epoch times.
  static int dense_group_size(int world, double t_dense, double t_coarse);
  // What the experiment will train, stage by stage (as the log and the
  // run folders name the stages): the runs (method, seed) in order, those
  // `finished` marked kept, then each method's stages with their sample
  // shape, batch, learning rate and stop rule, and what each transfer or
  // fusion carries. For `mrmf experiment --check` (plan_description.cpp).
  std::string describe_plan(const std::vector<std::pair<std::string, uint64_t>>& runs,
                            const std::vector<std::pair<std::string, uint64_t>>& finished) const;
  // What a split means in time: each group's epoch (the probe's all-rank epoch
  // times scaled to the group's ranks) and its stage at the epoch guard. The
  // epoch-time rule balances epochs, not stages: the groups finish together
  // only if both stages run as many epochs. Returns a notice when the rank
  // count forces the groups' epochs more than 1.5x apart (few ranks), empty
  // otherwise; `summary` always gets the one-line description.
  static std::string split_balance_notice(int world, int dense_ranks, double t_dense, double t_coarse,
                                          const StageStops& stops, std::string* summary = nullptr);

 private:
  struct Stage {
    std::unique_ptr<Trainer> trainer;
    StageResult result;
  };
  Stage train_stage(const std::string& name, const std::string& role, const Resolution& r, uint64_t seed,
                    const StopRule& stop, double target, std::unique_ptr<Model> start, Communicator& comm,
                    const std::string& dir, const std::function<void(Trainer&)>& before_fit = {},
                    const std::function<bool()>& after_stop = {}, const std::function<bool()>& end_extra_epoch = {},
                    const std::function<bool()>& stop_requested_elsewhere = {});
  void keep_optimizer_state(Trainer& fused, Trainer* coarse, Trainer* dense);
  // `label` names the run's folder and stages (the method unless a
  // fallback runs one method's stages under another's name).
  MethodRun run_sequential(const std::string& method, uint64_t seed, const std::string& label = "");
  MethodRun run_concurrent(uint64_t seed);
  // The dense and coarse epoch times, given or probed; nullopt when a probe's
  // loss became non-finite (the same on every rank: the loss is all-reduced).
  std::optional<std::pair<double, double>> probe_epoch_times(const Resolution& coarse, uint64_t seed);
  // The dense group's size for the concurrent run in `dir`: probed and
  // recorded, or the recorded one when resuming; nullopt when the probe
  // diverged. *probe_s: the seconds the split took (its probe), or the first
  // attempt's for a resumed run that keeps its split.
  std::optional<int> concurrent_split(const std::string& dir, const Resolution& coarse, uint64_t seed, double* probe_s);
  void check_before_training();
  // Every stage of every planned method set up without training (preflight.cpp).
  void check_planned_stages() const;
  // <out>/<label>/seed<k>: a run's stage folders.
  std::string run_dir(const std::string& label, uint64_t seed) const;
  // The initialisation (and shuffling) seed of stage `stage`'s dense model.
  uint64_t dense_seed(uint64_t seed, size_t stage) const;

  ExperimentConfig cfg_;
  Communicator& world_;
  Device device_;
  std::string out_;
  bool resume_ = false;  // of the current run
};

}  // namespace mrmf
