// The data-parallel trainer: one model, one dataset resolution, one run.
//
// Synchronous data parallelism: every rank computes gradients on its local
// batch; GradientSync averages the flat gradient buffer in buckets launched
// while backward runs; every rank then applies the same optimizer update.
// Per epoch it measures the breakdown the MRMF paper reports:
//   io      - time the loader made the trainer wait for a batch
//   compute - forward + backward + optimizer (wall time; the GPU stream is
//             synchronized once per step by the loss read-back)
//   comm    - gradient communication not hidden behind backward
//   epoch   - wall time of the whole epoch (training + validation, including
//             the precise-BN pass when train.precise_bn_batches > 0)
// and writes one JSON object per epoch to <out>/metrics.jsonl.
//
// Stop conditions: max epochs, target validation loss, and the loss-plateau
// rule (stop_rules.h). The fusion orchestrator runs several trainers (coarse,
// dense, fine-tune) and moves models between them (set_model/release_model).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "data/loader.h"
#include "fusion/checkpoint.h"
#include "fusion/config.h"
#include "fusion/stop_rules.h"
#include "layers/context.h"
#include "models/registry.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace mrmf {

struct EpochRecord {
  int64_t epoch = 0;  // 0-based
  double train_loss = 0, val_loss = 0, lr = 0;
  // io/compute/comm/val/epoch are one rank's (the slowest): io = waiting
  // for batches; compute = the steps minus comm; comm = waiting for the
  // gradient all-reduce after backward and for the per-step loss
  // all-reduce; val = BN re-calibration/averaging + validation; epoch = the
  // whole epoch (also loader restarts and mid-epoch checkpoints).
  double io_s = 0, compute_s = 0, comm_s = 0, val_s = 0, epoch_s = 0;
  // Not a part of the epoch beside the others: the time with a gradient
  // all-reduce in flight, hidden behind backward or not, plus the loss
  // all-reduce (>= comm_s; the difference is what backward hid). 0 on one
  // rank; absent (0) in metrics written before it existed.
  double comm_in_flight_s = 0;
  double samples_per_s = 0;  // global training samples per second of epoch time minus validation
  int64_t steps = 0, samples = 0;  // steps run by this process; global samples
  int64_t resumed_at_step = 0;     // > 0: a partial epoch, continued from a mid-epoch checkpoint
  // Such an epoch's time in the earlier process(es), up to the checkpoint it
  // continued from: not in epoch_s (this process's part, which the columns
  // add up to), but spent on the stage, so its time counts it.
  double earlier_s = 0;
  bool cut_short = false;          // an extra epoch ended early (TrainerOptions::end_extra_epoch)
  bool partial() const { return resumed_at_step > 0 || cut_short; }
  std::string tag;  // which model/stage (orchestrator runs)
  std::string to_json() const;
  // The inverse of to_json (one metrics.jsonl line); a null loss (NaN or
  // Inf when written) reads back as NaN. Throws nlohmann::json errors.
  static EpochRecord from_json(const nlohmann::json& j);
};

struct FitResult {
  std::vector<EpochRecord> history;
  std::string stop_reason;  // "target", "plateau", "max_epochs"
  bool reached_target = false;
  double final_val_loss = 0;
  double total_s = 0;  // sum of epoch times
  // Epochs (and their time) an earlier process ran before --resume, from
  // the metrics.jsonl lines the checkpoint covers (rank 0 only).
  int64_t resumed_epochs = 0;
  double resumed_s = 0;
  std::vector<EpochRecord> resumed_history;  // those epochs' records (rank 0 only)
  int64_t overtime_epochs = 0;  // trained past the stop because after_stop asked (included in history)
  int64_t epochs() const { return static_cast<int64_t>(history.size()); }
};

struct TrainerOptions {
  std::string out_dir;          // metrics.jsonl, summary.json, checkpoint.h5; "" = write nothing
  bool resume = false;          // continue from <out>/checkpoint.h5 when it exists
  std::string tag;              // label for log lines and metrics ("", "coarse", ...)
  bool write_checkpoints = true;
  bool progress = true;         // a progress bar on a terminal (rank 0)
  // Compare the training data's fingerprint across ranks (sizes and first
  // labels: the same size can hide other data). Off where the caller has
  // compared it already (an experiment's identity holds it): for CosmoFlow it
  // opens every file of the split once more.
  bool check_data_identity = true;
  // A non-finite loss ends fit() with stop_reason "diverged" (final loss
  // NaN) instead of throwing NonFiniteLoss: an experiment records such a run
  // and goes on with the others.
  bool divergence_ends_run = false;
  std::function<void(const EpochRecord&)> on_epoch;  // called on every rank after each epoch
  std::function<void(int64_t step)> on_step;         // after each training step (and its checkpoint, if any)
  // Asked after the stop condition (or the guard) has ended training, and
  // again after each further epoch: true trains one more. It must return
  // the same on every rank of the trainer's communicator. Concurrent MRMF
  // uses it to let the group that finishes first train on while it would
  // otherwise wait for the other.
  std::function<bool()> after_stop;
  // Asked after every step of such an extra epoch: true ends the epoch there
  // (validated and recorded as cut short), so that the group waiting for
  // this one waits for a step, not for the rest of an epoch. The same on
  // every rank, like after_stop.
  std::function<bool()> end_extra_epoch;
  // Asked before every step's loss all-reduce: true (on any rank; the
  // all-reduce carries it, as it carries a stop signal) stops training at
  // this step as a stop signal to a rank would, with a checkpoint.
  // Concurrent MRMF: the other rank group was stopped by a signal, and this
  // one must not train on alone until the job's end aborts it.
  std::function<bool()> stop_requested_elsewhere;
};

// Thrown (kind Runtime) when the loss becomes NaN/Inf; the last good checkpoint is kept.
struct NonFiniteLoss : Error {
  using Error::Error;
};
// Thrown (kind Runtime) after a stop signal (SIGTERM, SIGUSR1: a job's time
// limit), once a checkpoint of where training stands is written: --resume
// continues from it.
struct StopRequested : Error {
  using Error::Error;
};

class Trainer {
 public:
  // Opens the loaders of `cfg.data` and builds the model (initialized from
  // cfg.train.seed, or from cfg.train.init). Everything is validated here,
  // before any training compute.
  Trainer(const RunConfig& cfg, Communicator& comm, Device device, TrainerOptions opts = {});
  ~Trainer();

  FitResult fit();
  // Mean wall seconds per training step over `steps` steps (no validation, no
  // checkpoint): the probe that sizes the concurrent groups. Trains the model.
  double time_steps(int64_t steps);
  // Mean squared error over the whole split on every rank (averaged over ranks).
  double evaluate(data::Loader& loader);
  double evaluate_validation() { return evaluate(*val_); }

  // Replaces the model (fusion): same name and input shape as the data's.
  // The optimizer and schedule are rebuilt fresh (state reset).
  void set_model(std::unique_ptr<Model> model);
  std::unique_ptr<Model> release_model();
  Model& model() { return *model_; }
  const ModelSpec& spec() const { return spec_; }
  // The builds (core/version.h) that trained this run, oldest first: the
  // resumed checkpoint's, then this one if this process took a step.
  std::vector<std::string> trained_by() const;
  Optimizer& optimizer() { return *opt_; }
  Context& context() { return *ctx_; }
  // Frees the loaders (and their in-memory caches, back to the process's
  // budget) once training is over; model, optimizer and spec stay usable.
  void release_data() {
    train_.reset();
    val_.reset();
  }
  data::Loader& train_loader() { return *train_; }
  const RunConfig& config() const { return cfg_; }
  int64_t global_step() const { return step_; }

 private:
  // fit()'s epochs from start_epoch_ until a stop rule (and the extra epochs
  // after_stop asks for); `run_epoch(epoch, extra)` trains and records one.
  void train_to_stop(FitResult& res, const std::function<EpochRecord(int64_t, bool)>& run_epoch,
                     const std::string& who);
  // Throws StopRequested after a stop signal (`saved`: a checkpoint of this
  // point has just been written).
  [[noreturn]] void stop_for_signal(bool saved);
  bool stop_seen_ = false;  // a stop signal reached some rank (all ranks agree: the loss all-reduce carries it)
  int stop_sig_ = 0;
  bool model_given_ = false;  // set_model() handed a model over (its groups are not random)
  void build_optimizer();
  // A Config error unless every rank holds the same weights (parameters).
  void check_same_weights(const std::string& what);
  // extra: an epoch past the stop (after_stop) -- no step checkpoints (a
  // resume would find the stage stopped and leave the epoch half-trained),
  // and it ends early when end_extra_epoch says so.
  EpochRecord train_epoch(int64_t epoch, int64_t max_steps = 0, bool validate = true, bool extra = false);
  // At an epoch's end (batch 0), or inside epoch `epochs_done` after `batch`
  // of its batches, whose training losses summed to `loss_sum`.
  void save(int64_t epochs_done, int64_t batch = 0, double loss_sum = 0);
  bool try_resume();
  std::string checkpoint_path() const;  // <out>/checkpoint.h5
  void write_metrics(const EpochRecord& r);

  RunConfig cfg_;
  Communicator& comm_;
  Device device_;
  TrainerOptions opts_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<data::Loader> train_, val_;
  ModelSpec spec_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<LrSchedule> sched_;
  PlateauRule plateau_;
  int64_t start_epoch_ = 0, step_ = 0;
  // A mid-epoch checkpoint's position in epoch start_epoch_ (0: at its start).
  int64_t resume_batch_ = 0;
  double resume_loss_sum_ = 0;
  // A hash of the training and validation data's fingerprints (sizes and
  // first labels), taken as the run starts where check_data_identity:
  // checkpoints carry it, and --resume compares it (the same path can hold
  // other data).
  uint64_t data_hash_ = 0;
  // The time earlier processes spent in epoch start_epoch_ before a
  // mid-epoch checkpoint (also when the epoch restarts on another rank
  // count: that time was spent); while an epoch trains, its start and that
  // carried time, which a mid-epoch checkpoint adds up (an epoch
  // interrupted twice carries both parts).
  double resume_earlier_s_ = 0;
  std::chrono::steady_clock::time_point epoch_t0_{};
  double epoch_earlier_s_ = 0;
  int64_t resumed_epochs_ = 0;  // see FitResult
  std::vector<EpochRecord> resumed_history_;
  double resumed_s_ = 0;
  double resumed_val_loss_ = 0;  // the last resumed epoch's (rank 0 only, as the two above)
  double last_val_loss_ = 0;     // of the last finished epoch; in checkpoints, so that every rank has it
  bool resumed_val_known_ = false;  // the checkpoint carried last_val_loss
  // Provenance (never compared): the builds that trained the run before this
  // process, from the resumed checkpoint, and the step it resumed at.
  std::vector<std::string> trained_before_;
  int64_t resumed_step_ = 0;
};

// The model spec a run configuration describes for data of `sample_shape`.
ModelSpec model_spec_for(const RunConfig& cfg, const Shape& sample_shape);
// The per-sample input shape a run configuration gives (stored shape reduced
// by data.reduce), from file metadata only. Throws naming the axis when a
// factor does not divide it.
Shape reduced_sample_shape(const RunConfig& cfg);
// Where a BatchNorm layer of `model` would see one value a channel in
// training with `batch` samples (Neuron Inverter's flat BatchNorm at batch
// 1, a BatchNorm3d on a 1x1x1 map): "layer 'NAME' (input SHAPE)"; empty
// where none would. Such a step fails, so it is refused before the data load.
std::string batchnorm_batch_problem(Model& model, int64_t batch);
// A Config error naming train.batch_size where batchnorm_batch_problem finds one.
void check_batchnorm_batch(Model& model, const RunConfig& cfg);
// A Config error unless data.scale (with transform 'scale') has a factor per
// channel of data with `channels` channels.
void check_scale_channels(const RunConfig& cfg, int64_t channels);
// The data one split of a run reads (data.path, or the split's own file list).
data::DataSpec data_spec(const RunConfig& cfg, data::Split split);

// "data.layout reinterpret there, transpose here, ..." where the run that
// wrote `checkpoint` prepared its input otherwise than `cfg` does; empty if alike.
std::string init_input_differences(const RunConfig& cfg, const std::string& checkpoint);
// Loads cfg.train.init into `model` (built from `spec`): the groups
// train.init_groups names, or with "resample" the whole checkpointed model,
// of another resolution, through MRT's resampled transfer
// (fusion/resample_top.h). Returns the number of tensors set.
size_t init_from_checkpoint(const RunConfig& cfg, Model& model, const ModelSpec& spec, Stream* stream = nullptr);
// Every rank's effective configuration must be rank 0's; where one is not
// (a launch that gave ranks different flags), a Config error names the keys
// it differs in: rank 0's value -> that rank's. The trainer calls it first.
void check_same_config(const Communicator& comm, const RunConfig& cfg);

// What a Trainer checks before it reads data, for a run on `ranks` ranks that
// has not started: the data's metadata and shards, the model, the --init
// checkpoint (loaded into a CPU copy). Returns that model (and its spec).
// `data_checked` (optional) remembers the data already checked, by files,
// split, batch and ranks, so that rungs reading the same files open them once.
std::unique_ptr<Model> check_run_before_training(const RunConfig& cfg, const Communicator& comm, int ranks,
                                                 Device device, ModelSpec* spec_out = nullptr,
                                                 std::set<std::string>* data_checked = nullptr);
// The loader options a run config implies for this rank.
data::LoaderOptions loader_options(const RunConfig& cfg, const Communicator& comm, Device device, bool training);
// The learning-rate schedule a run config describes.
std::unique_ptr<LrSchedule> make_schedule(const RunConfig& cfg);
// The optimizer a run config names, over `store` (defined in run_setup.cpp, as the above).
std::unique_ptr<Optimizer> make_optimizer(const RunConfig& cfg, ParamStore& store);

}  // namespace mrmf
