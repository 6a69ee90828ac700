#include "fusion/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "core/check_mpi.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/nvtx.h"
#include "core/stop_signal.h"
#include "data/cache_budget.h"
#include "fusion/bn_recalibrate.h"
#include "fusion/checkpoint.h"
#include "fusion/grad_sync.h"
#include "fusion/resample_top.h"
#include "kernels/elementwise_ops.h"

namespace mrmf {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A test hook's "R:S" (rank R in MPI_COMM_WORLD, the trainer's -- stage's --
// global step S), read once; {-1, -1} when unset.
static std::pair<long, long> fault_hook(const char* env) {
  long r = -1, s = -1;
  const char* v = std::getenv(env);
  if (!v || std::sscanf(v, "%ld:%ld", &r, &s) != 2) r = s = -1;
  return {r, s};
}

// Test hooks. MRMF_FAULT_EXIT=R:S (tests/mpi/rank_death.sh): rank R dies
// abruptly at step S -- no MPI_Finalize, no unwinding, like a crash or an
// OOM kill; the surviving ranks must then exit with an error instead of
// hanging. MRMF_FAULT_SIGNAL=R:S: rank R sends itself SIGTERM when S steps
// are done, as a batch system does at a job's time limit (the stop-signal
// tests); step S + 1 carries it to every rank and is the last.
static void maybe_inject_fault(int64_t step) {
  static const std::pair<long, long> exit_at = fault_hook("MRMF_FAULT_EXIT");
  static const std::pair<long, long> signal_at = fault_hook("MRMF_FAULT_SIGNAL");
  if (exit_at.first < 0 && signal_at.first < 0) return;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (exit_at.first == rank && exit_at.second == step) {
    std::fprintf(stderr, "[rank %d] MRMF_FAULT_EXIT: dying at step %lld\n", rank, static_cast<long long>(step));
    std::fflush(stderr);
    std::_Exit(9);
  }
  if (signal_at.first == rank && signal_at.second == step && !send_stop_signal_to_self(SIGTERM))
    std::fprintf(stderr, "[rank %d] MRMF_FAULT_SIGNAL: SIGTERM was not recorded within 10 s\n", rank);
}

// ------------------------------------------------------------------ Trainer
std::string init_input_differences(const RunConfig& cfg, const std::string& checkpoint) {
  const std::string text = read_checkpoint_header(checkpoint).training.config;
  if (text.empty()) return "";
  RunConfig then;
  try {
    then = parse_run_config(text, {}, checkpoint + " (its run configuration)");
  } catch (const Error&) {
    return "";  // written by another version: nothing to compare
  }
  std::string out;
  const auto differ = [&](const char* key, const std::string& a, const std::string& b) {
    if (a != b) out += (out.empty() ? "" : ", ") + std::string(key) + " " + a + " there, " + b + " here";
  };
  differ("data.layout", then.data.layout, cfg.data.layout);
  differ("data.transform", then.data.transform, cfg.data.transform);
  return out;
}

// How a run config's train.init is loaded when it names groups (or all):
// which ones, and whether the input shape must match.
static ParamLoadOptions init_load_options(const RunConfig& cfg) {
  ParamLoadOptions lo;
  if (cfg.train.init_groups != "all") lo.groups = {parse_group(cfg.train.init_groups)};
  lo.check_input_shape = cfg.train.init_groups == "all";
  return lo;
}

size_t init_from_checkpoint(const RunConfig& cfg, Model& model, const ModelSpec& spec, Stream* stream) {
  if (cfg.train.init_groups == "resample") {
    const LoadedModel src = load_model_from_checkpoint(cfg.train.init, Device::cpu());
    const auto m = transfer_resampled(*src.model, spec, Device::cpu(), cfg.train.seed);
    Stream& st = stream ? *stream : cpu_stream();
    model.params().values().copy_from(m->params().values(), st);
    model.params().buffers().copy_from(m->params().buffers(), st);
    st.synchronize();
    return m->params().entries().size();
  }
  ParamLoadOptions lo = init_load_options(cfg);
  lo.stream = stream;
  return load_params(cfg.train.init, model, lo).loaded.size();
}

void check_same_config(const Communicator& comm, const RunConfig& cfg) {
  if (comm.size() == 1) return;
  const std::string root_text = comm.broadcast_string(cfg.text, 0);
  const bool differs = cfg.text != root_text;
  const int first = static_cast<int>(-comm.allreduce_max(-(differs ? comm.rank() : comm.size())));
  if (first >= comm.size()) return;
  std::string diff;
  if (comm.rank() == first)
    for (const auto& d : config_differences(root_text, cfg.text)) diff += "\n  " + d;
  diff = comm.broadcast_string(diff, first);
  MRMF_THROW(Config,
             "ranks disagree on the configuration (is every rank given the same command line?): rank 0 -> rank ", first,
             ":", diff);
}

Trainer::Trainer(const RunConfig& cfg, Communicator& comm, Device device, TrainerOptions opts)
    : cfg_(cfg), comm_(comm), device_(device), opts_(std::move(opts)),
      plateau_(cfg.stop.plateau_threshold, cfg.stop.plateau_patience, cfg.stop.min_epochs,
               cfg.stop.plateau_reference == "best") {
  MRMF_CHECK_KIND(Config, !cfg_.data.path.empty() || !cfg_.data.train_files.empty(),
                  "config key 'data.path': no dataset given");
  // Ranks must agree on the whole configuration before anything else.
  check_same_config(comm_, cfg_);

  ContextOptions co;
  co.deterministic = cfg_.train.deterministic;
  co.seed = cfg_.train.seed;
  co.allow_tf32 = cfg_.runtime.allow_tf32;
  co.cudnn_benchmark = cfg_.runtime.cudnn_benchmark;
  co.workspace_limit_bytes = static_cast<size_t>(cfg_.runtime.cudnn_workspace_mb) << 20;
  ctx_ = std::make_unique<Context>(device_, co);

  // What can be checked without reading the data is checked before the
  // shards are read (preloading a large shard takes minutes): the reduction
  // factors and the transform against the file's sample shape, the model for
  // that shape, an --init checkpoint against the model.
  const Shape sample = reduced_sample_shape(cfg_);
  spec_ = model_spec_for(cfg_, sample);
  auto model = build_model(spec_);
  model->build(device_, cfg_.train.seed, default_init_scheme(spec_));
  model_ = std::move(model);
  check_batchnorm_batch(*model_, cfg_);  // the first step would fail, after the data were loaded
  comm_.check_same_on_all_ranks(model_->params().layout_hash(), "the model's parameter layout");
  // Identical initial weights everywhere, whatever each rank's RNG did.
  comm_.broadcast(model_->params().values(), 0, ctx_->stream());
  comm_.broadcast(model_->params().buffers(), 0, ctx_->stream());
  // A run that resumes from its own checkpoint takes every weight from it
  // (try_resume): the --init checkpoint is neither read nor needed then (it
  // may be gone, or retrained at another resolution, since the first start).
  const bool resuming = opts_.resume && !opts_.out_dir.empty() && fs::exists(checkpoint_path());
  // Agreed before the init branch below, whose weight check is collective.
  comm_.check_same_on_all_ranks(resuming ? 1 : 0,
                                "whether to resume (1) or start fresh (0) (does every rank see the "
                                "same --out and its checkpoint.h5?)");
  if (!cfg_.train.init.empty() && !resuming) {
    const size_t n = init_from_checkpoint(cfg_, *model_, spec_, &ctx_->stream());
    check_same_weights("the weights read from train.init " + cfg_.train.init);
    log::info("{}initialized {} tensors from {}{}", opts_.tag.empty() ? "" : opts_.tag + ": ", n, cfg_.train.init,
              cfg_.train.init_groups == "resample" ? " (its top resampled to this resolution)" : "");
    const std::string differs = init_input_differences(cfg_, cfg_.train.init);
    if (!differs.empty())
      log::info(
          "{}notice: {} was trained on input prepared differently ({}): its weights see this run's "
          "input differently",
          opts_.tag.empty() ? "" : opts_.tag + ": ", cfg_.train.init, differs);
  }

  data::set_cache_budget(cfg_.data.cache_max_mb << 20);
  const data::DataSpec train_data = data_spec(cfg_, data::Split::Train), val_data = data_spec(cfg_, data::Split::Val);
  train_ = data::open_loader(train_data, loader_options(cfg_, comm_, device_, true));
  val_ = data::open_loader(val_data, loader_options(cfg_, comm_, device_, false));
  // Every training step all-reduces: ranks whose shards hold different
  // numbers of batches (each rank read a different copy of the data) would
  // wait for each other forever at the first rank's last step.
  // The same count of batches can hide different data (another seed of the
  // generator on one node): the first labels are compared too.
  // The same hash goes into checkpoints (--resume compares it): taken here,
  // as the run starts, not when the first checkpoint is written.
  if (opts_.check_data_identity) {
    data_hash_ = fnv1a64(data::data_fingerprint(train_data) + "|" + data::data_fingerprint(val_data));
    if (comm_.size() > 1)
      comm_.check_same_on_all_ranks(data_hash_, "the training and validation data (" + train_data.path +
                                                    ": sizes and first labels; do all ranks read the same data set?)");
  }
  comm_.check_same_on_all_ranks(static_cast<uint64_t>(train_->batches_per_epoch()),
                                "the number of training batches per epoch (" + train_data.path +
                                    "; do all ranks read the same data set?)");
  // Validation reads whole batches on every rank, as the originals do: the
  // loss that the stop rules and targets compare leaves the rest out, which
  // a user comparing it with `mrmf eval` (every sample) should know.
  const auto val_used = static_cast<int64_t>(comm_.allreduce_sum(static_cast<double>(val_->samples_per_epoch())));
  if (comm_.is_root()) {
    const int64_t val_total = data::split_samples(val_data);
    if (val_used < val_total)
      log::info(
          "{}notice: the validation loss is taken over {} of the val split's {} samples (whole batches of {} "
          "on each of {} rank(s)); train.val_batch_size sets the batch",
          opts_.tag.empty() ? "" : opts_.tag + ": ", val_used, val_total, val_->batch_size(), comm_.size());
  }
  // A CosmoFlow glob, list or folder without split folders is every
  // split's data: the validation loss was the training files' own.
  if (comm_.is_root() && train_data.format != data::DataFormat::NeuronInverter &&
      data::cosmoflow_split_files(train_data) == data::cosmoflow_split_files(val_data))
    log::info(
        "{}notice: the val split reads the same files as the train split ({}): the validation loss is "
        "measured on training data; data.val_files names a separate validation set",
        opts_.tag.empty() ? "" : opts_.tag + ": ", train_data.path);
  // The model's outputs are compared with the labels at the first loss,
  // from inside the kernel, naming no key.
  const int64_t predicted = model_->output_shape(1)[1];
  MRMF_CHECK_KIND(Config, predicted == train_->num_labels(), "the model predicts ", predicted,
                  " values (config key 'model.options.outputs') but the data have ", train_->num_labels(),
                  " labels per sample (", train_data.path, ")");
  // Each split is read from its own files: a validation set at another
  // resolution than the training set (a coarse copy put in the wrong place)
  // is named, with where each split's data come from.
  for (const auto& [name, ds, loader] : {std::make_tuple("train", &train_data, train_.get()),
                                        std::make_tuple("val", &val_data, val_.get())})
    MRMF_CHECK_KIND(Data, loader->sample_shape() == sample, "the ", name, " split (", ds->path,
                    ") has samples of ", loader->sample_shape().str(),
                    " after data.reduce, the model expects ", sample.str(), " (from the train split",
                    cfg_.data.reduce.empty() ? "" : " and data.reduce", ")");
  build_optimizer();  // also freezes train.freeze
}

Trainer::~Trainer() = default;

void Trainer::check_same_weights(const std::string& what) {
  // Each rank reads its own copy of a checkpoint: a copy that differs
  // (node-local folders, a relative path from another folder) trained and
  // kept one model per rank, and averaged their gradients, silently.
  if (comm_.size() > 1)
    comm_.check_same_on_all_ranks(model_->params().values_digest(ctx_->stream()),
                                  what + " (do all ranks read the same file?)");
}

void Trainer::build_optimizer() {
  opt_ = make_optimizer(cfg_, model_->params());
  sched_ = make_schedule(cfg_);
  if (!cfg_.train.freeze.empty()) opt_->freeze(parse_group(cfg_.train.freeze));
}

void Trainer::set_model(std::unique_ptr<Model> model) {
  MRMF_CHECK_KIND(Shape, model && model->built(), "set_model: an unbuilt model");
  MRMF_CHECK_KIND(Shape, model->sample_shape() == spec_.sample_shape, "set_model: model input ",
                  model->sample_shape().str(), " does not match the data's ", spec_.sample_shape.str());
  // A rung's train.init (resolution_overrides) was loaded and then
  // replaced here without a word, after a log line saying it was applied.
  if (!cfg_.train.init.empty())
    log::info(
        "{}notice: this stage starts from the model it was given (fused or transferred), not from train.init "
        "({}), which is not used",
        opts_.tag.empty() ? "" : opts_.tag + ": ", cfg_.train.init);
  model_ = std::move(model);
  model_given_ = true;
  build_optimizer();
}

std::unique_ptr<Model> Trainer::release_model() { return std::move(model_); }

double Trainer::evaluate(data::Loader& loader) {
  MRMF_NVTX_RANGE("validation");
  ctx_->set_training(false);
  loader.start_epoch(0);
  data::LoaderBatch b;
  double sum = 0, count = 0;
  while (loader.next(b)) {
    Tensor p = model_->forward(*ctx_, b.x);
    const double n = static_cast<double>(b.y.numel());
    sum += static_cast<double>(kernels::mse_loss(ctx_->stream(), p, b.y)) * n;
    count += n;
  }
  model_->net().clear_saved();
  ctx_->set_training(true);
  sum = comm_.allreduce_sum(sum);
  count = comm_.allreduce_sum(count);
  MRMF_CHECK_KIND(Data, count > 0, "validation split has no complete batch on any rank");
  return sum / count;
}

double Trainer::time_steps(int64_t steps) {
  const EpochRecord r = train_epoch(0, steps, /*validate=*/false);
  return (r.io_s + r.compute_s + r.comm_s) / static_cast<double>(std::max<int64_t>(r.steps, 1));
}

EpochRecord Trainer::train_epoch(int64_t epoch, int64_t max_steps, bool validate, bool extra) {
  EpochRecord r;
  r.epoch = epoch;
  r.tag = opts_.tag;
  // Rank 0 alone writes the last epoch's checkpoint and metrics: without a
  // barrier the others would start this epoch's clock at once and wait for
  // it in the first step's loss all-reduce -- booked as comm, every epoch.
  comm_.barrier();
  const auto t_epoch = Clock::now();
  epoch_t0_ = t_epoch;
  epoch_earlier_s_ = epoch == start_epoch_ ? std::exchange(resume_earlier_s_, 0.0) : 0.0;
  r.earlier_s = epoch_earlier_s_;
  double loss_sum = 0;
  int64_t steps = 0;
  if (resume_batch_ > 0 && epoch == start_epoch_) {
    // Continue a mid-epoch checkpoint: same sample order, same running loss.
    train_->restore({epoch, resume_batch_, train_->state().seed});
    steps = resume_batch_;
    loss_sum = resume_loss_sum_;
    resume_batch_ = 0;
  } else {
    train_->start_epoch(epoch);
  }
  ctx_->set_training(true);
  GradientSync sync(comm_, model_->params(), static_cast<size_t>(cfg_.train.bucket_mb) << 20);
  Model& m = *model_;
  m.net().set_backward_hook([&](Module& mod) { sync.ready_from(m.first_param_offset(mod), ctx_->stream()); });
  // The hook refers to `sync`, a local: removed however this function ends.
  struct HookGuard {
    Sequential& net;
    ~HookGuard() { net.set_backward_hook(nullptr); }
  } hook_guard{m.net()};
  Event step_begin = Event::create(ctx_->device()), step_end = Event::create(ctx_->device());

  int64_t total = cfg_.train.max_steps_per_epoch > 0
                      ? std::min(cfg_.train.max_steps_per_epoch, train_->batches_per_epoch())
                      : train_->batches_per_epoch();
  if (max_steps > 0) total = std::min(total, max_steps);
  const bool bar = opts_.progress && comm_.is_root() && isatty(STDERR_FILENO);
  const int64_t first = steps;
  data::LoaderBatch b;
  r.lr = sched_->lr(epoch, step_ - first);  // at the epoch's first step, also when continued mid-epoch
  while (steps < total) {
    bool got;
    {
      MRMF_NVTX_RANGE("data");
      got = train_->next(b);
    }
    if (!got) break;
    maybe_inject_fault(step_);
    const double lr = sched_->lr(epoch, step_);
    step_begin.record(ctx_->stream());
    Tensor pred;
    float loss;
    {
      MRMF_NVTX_RANGE("forward");
      pred = m.forward(*ctx_, b.x);
      loss = kernels::mse_loss(ctx_->stream(), pred, b.y);
    }
    // One scalar all-reduce per step: the global training loss, and a NaN on
    // any rank becomes a NaN on every rank, so all stop together. It is a
    // barrier: the wait for the slowest rank's forward (or its I/O stall)
    // happens here, and is booked as communication, not compute.
    const auto t_loss = Clock::now();
    // The stop signal travels with the loss: every rank learns at the same
    // step whether any rank was asked to stop (no collective of its own).
    const bool stop_here =
        stop_signal_received() != 0 || (opts_.stop_requested_elsewhere && opts_.stop_requested_elsewhere());
    double sums[2] = {static_cast<double>(loss), stop_here ? 1.0 : 0.0};
    comm_.allreduce_sum(sums, 2);
    const double global_loss = sums[0] / comm_.size();
    if (sums[1] > 0 && !stop_seen_) {
      stop_seen_ = true;
      stop_sig_ = stop_signal_received();
    }
    const double loss_sync_s = comm_.size() > 1 ? seconds_since(t_loss) : 0.0;
    if (!std::isfinite(global_loss)) {
      throw NonFiniteLoss(ErrorKind::Runtime,
                          "non-finite training loss (" + std::to_string(global_loss) + ") at epoch " +
                              std::to_string(epoch) + ", step " + std::to_string(step_) +
                              (opts_.out_dir.empty() || !fs::exists(checkpoint_path())
                                   ? std::string("; no checkpoint had been written yet")
                                   : "; the last good checkpoint is kept in " + checkpoint_path()));
    }
    {
      MRMF_NVTX_RANGE("backward");
      Tensor g = Tensor::empty(pred.shape(), DType::F32, pred.device());
      kernels::mse_grad(ctx_->stream(), pred, b.y, g);
      sync.begin_step();
      m.backward(*ctx_, g);
    }
    {
      MRMF_NVTX_RANGE("allreduce");
      sync.finish(ctx_->stream());
    }
    {
      MRMF_NVTX_RANGE("optimizer");
      opt_->step(ctx_->stream(), static_cast<float>(lr));
      step_end.record(ctx_->stream());
      ctx_->stream().synchronize();
    }
    // Measured on the device's own timeline (CUDA events; host timestamps on
    // the CPU): the step, and the part of it spent waiting for gradients or
    // for the loss all-reduce (the device idles meanwhile: host time is
    // device time there).
    const double step_s = static_cast<double>(step_end.elapsed_ms_since(step_begin)) * 1e-3;
    const double comm_s = std::min(sync.exposed_comm_seconds() + loss_sync_s, step_s);
    r.comm_s += comm_s;
    r.compute_s += step_s - comm_s;
    r.comm_in_flight_s += sync.in_flight_comm_seconds() + loss_sync_s;  // >= comm_s: in flight >= exposed
    loss_sum += global_loss;
    ++steps;
    ++step_;
    ctx_->set_step(static_cast<uint64_t>(step_));
    const int64_t every = cfg_.train.checkpoint_every_steps;
    if (validate && !extra && every > 0 && step_ % every == 0 && steps < total)
      save(epoch, steps, loss_sum);
    if (opts_.on_step) opts_.on_step(step_);
    if (stop_seen_ && steps < total) {
      // Inside the epoch: a step checkpoint where it can be resumed (not in
      // an extra epoch or a probe, which have none); at an epoch's end the
      // caller writes the epoch's checkpoint first.
      const bool can_save = validate && !extra;
      if (can_save) save(epoch, steps, loss_sum);
      stop_for_signal(can_save);
    }
    if (extra && steps < total && opts_.end_extra_epoch && opts_.end_extra_epoch()) {
      r.cut_short = true;
      break;
    }
    if (bar && (steps % 5 == 0 || steps == total))
      std::fprintf(stderr, "\r  %s epoch %lld  %lld/%lld  loss %.4g   ", opts_.tag.c_str(),
                   static_cast<long long>(epoch), static_cast<long long>(steps), static_cast<long long>(total),
                   loss_sum / steps);
  }
  if (bar) std::fprintf(stderr, "\r%80s\r", "");
  MRMF_CHECK_KIND(Data, steps > first, "epoch ", epoch, ": the training shard produced no batch");
  r.io_s = train_->wait_seconds();
  // The steps this process ran: an epoch continued from a mid-epoch
  // checkpoint is partial (its time and rate cover only those steps).
  r.steps = steps - first;
  r.resumed_at_step = first;
  r.samples = r.steps * cfg_.train.batch_size * comm_.size();
  r.train_loss = loss_sum / static_cast<double>(steps);
  const auto t_val = Clock::now();
  if (validate && cfg_.train.precise_bn_batches > 0) {
    // A re-calibration restarts this epoch's batches, which cancels what the
    // loader had prefetched of the next: order it again now, so that it is
    // read while validation runs instead of in the next epoch's io time. (A
    // repeated start of the same epoch is what the loader then expects next;
    // the re-calibration after it takes over those batches.) A model without
    // BN statistics re-calibrates nothing and leaves the loader alone.
    if (recalibrate_batchnorm(m, *ctx_, *train_, comm_, cfg_.train.precise_bn_batches, epoch).batches > 0)
      train_->restore({epoch + 1, 0, train_->state().seed});
  } else if (validate && comm_.size() > 1 && model_->params().buffers().numel() > 0) {
    // Each rank's BN running statistics followed its own batches: their
    // mean, on every rank, is what is validated and what rank 0 saves --
    // so the recorded validation loss is the checkpoint's, and a resumed
    // run (which loads rank 0's) continues exactly.
    comm_.allreduce_avg(model_->params().buffers(), ctx_->stream());
  }
  r.val_loss = validate ? evaluate(*val_) : 0.0;
  r.val_s = seconds_since(t_val);
  r.epoch_s = seconds_since(t_epoch);
  // Every column from one rank, the one whose epoch took longest (its epoch
  // is the job's): a max taken column by column mixed ranks -- a straggler's
  // I/O wait counted as io on its rank and again as the others' comm wait --
  // so that the columns summed to more than the epoch.
  double* const cols[] = {&r.io_s, &r.compute_s, &r.comm_s, &r.comm_in_flight_s, &r.val_s, &r.epoch_s};  // epoch last
  constexpr size_t kCols = std::size(cols);
  std::vector<double> mine;
  for (const double* c : cols) mine.push_back(*c);
  const std::vector<double> all = comm_.allgather(mine);
  size_t slowest = 0;
  for (size_t k = 1; k < all.size() / kCols; ++k)
    if (all[kCols * k + kCols - 1] > all[kCols * slowest + kCols - 1]) slowest = k;
  for (size_t c = 0; c < kCols; ++c) *cols[c] = all[kCols * slowest + c];
  r.samples_per_s = r.samples / std::max(r.epoch_s - r.val_s, 1e-9);
  return r;
}

FitResult Trainer::fit() {
  if (!opts_.out_dir.empty() && comm_.is_root()) fs::create_directories(opts_.out_dir);
  comm_.barrier();
  const bool resumed = try_resume();
  // A frozen group that nothing loaded (no train.init, or init_groups that
  // skip it, and no model handed over by set_model(): an experiment's
  // transferred or fused one) stays at its random initialisation.
  const auto& t = cfg_.train;
  const bool frozen_loaded =
      model_given_ ||
      (!t.init.empty() && (t.init_groups == "all" || t.init_groups == "resample" || t.init_groups == t.freeze));
  if (!t.freeze.empty() && !frozen_loaded && comm_.is_root())
    log::warn(
        "train.freeze={}: that group is not loaded from a checkpoint ({}), so it stays frozen at its random "
        "initialisation",
        t.freeze, t.init.empty() ? "no train.init / --init" : "train.init_groups=" + t.init_groups);
  // Each rank reads its own --out: ranks that see different folders (node-
  // local disks, mixed --resume/--force) would average gradients of
  // different models and then wait in different collectives forever.
  const std::string where = " (does every rank see the same --out and its checkpoint.h5?)";
  comm_.check_same_on_all_ranks(resumed ? 1 : 0, "whether to resume (1) or start fresh (0)" + where);
  comm_.check_same_on_all_ranks(static_cast<uint64_t>(start_epoch_), "the epoch to resume at" + where);
  comm_.check_same_on_all_ranks(static_cast<uint64_t>(step_), "the step to resume at" + where);
  // After the agreement on resuming: a rank that did not resume would pair
  // this collective with another one (and report the wrong disagreement).
  if (resumed) check_same_weights("the weights read from " + checkpoint_path());
  if (!resumed && !opts_.out_dir.empty() && comm_.is_root()) {
    const fs::path mp = fs::path(opts_.out_dir) / "metrics.jsonl";
    MRMF_CHECK_KIND(Data, std::ofstream(mp, std::ios::trunc).good(), mp.string(), ": cannot be written");
  }

  FitResult res;
  res.resumed_epochs = resumed_epochs_;
  res.resumed_s = resumed_s_;
  res.resumed_history = resumed_history_;
  const std::string who = opts_.tag.empty() ? "" : opts_.tag + " ";
  // What a resumed run that trains nothing more ends with.
  res.final_val_loss = resumed_val_known_ ? last_val_loss_ : resumed_val_loss_;
  // A run resumed from the checkpoint its own stop condition wrote is
  // complete: report that stop instead of training past it (the same stop
  // settings; a changed target or patience may let it go on).
  if (resumed && resume_batch_ == 0 && resumed_val_known_) {
    if (cfg_.stop.target_val_loss > 0 && last_val_loss_ <= cfg_.stop.target_val_loss) {
      res.stop_reason = "target";
      res.reached_target = true;
    } else if (plateau_.fired()) {
      res.stop_reason = "plateau";
    }
    if (!res.stop_reason.empty()) {
      log::info("{}the run in {} had already stopped ({}); nothing to train", who, opts_.out_dir, res.stop_reason);
      return res;
    }
  }
  // One epoch with its bookkeeping; returns its record.
  const auto run_epoch = [&](int64_t epoch, bool extra) {
    EpochRecord r = train_epoch(epoch, 0, true, extra);
    sched_->on_epoch_end(r.val_loss);
    res.history.push_back(r);
    res.total_s += r.epoch_s;
    res.final_val_loss = r.val_loss;
    last_val_loss_ = r.val_loss;
    write_metrics(r);
    // With several ranks, also the communication in flight (hidden or not).
    const std::string flight = comm_.size() > 1 ? fmt::format(" ({:.2f}s in flight)", r.comm_in_flight_s) : "";
    log::info("{}epoch {:>3}  train {:.5f}  val {:.5f}  lr {:.2e}  io {:.2f}s  compute {:.2f}s  comm {:.2f}s{}  "
              "epoch {:.2f}s  {:.0f} samples/s",
              who, epoch, r.train_loss, r.val_loss, r.lr, r.io_s, r.compute_s, r.comm_s, flight, r.epoch_s,
              r.samples_per_s);
    if (opts_.on_epoch) opts_.on_epoch(r);
    return r;
  };
  try {
    train_to_stop(res, run_epoch, who);
  } catch (const NonFiniteLoss& e) {  // the same on every rank: the loss is all-reduced
    if (!opts_.divergence_ends_run) throw;
    res.stop_reason = "diverged";
    res.reached_target = false;
    res.final_val_loss = std::numeric_limits<double>::quiet_NaN();
    log::info("{}diverged: {}", who, e.message());
  }
  return res;
}

void Trainer::stop_for_signal(bool saved) {
  const bool wrote = saved && !opts_.out_dir.empty() && opts_.write_checkpoints;
  // Every rank of the group is here at the same step (the stop travels with
  // the loss all-reduce), but rank 0 alone writes the checkpoint: the others
  // wait for it, or main() would abort the job with it half written.
  comm_.idle_barrier();
  note_stopped_by_signal();
  throw StopRequested(
      ErrorKind::Runtime,
      fmt::format("{}stopped by {} (a job's time limit?) at step {}{}", opts_.tag.empty() ? "" : opts_.tag + ": ",
                  stop_sig_ != 0 ? stop_signal_name(stop_sig_) : "a stop signal to another rank", step_,
                  wrote ? "; a checkpoint of this point is in " + checkpoint_path() +
                              ": the same command with --resume (in place of --force) continues"
                        : "; no checkpoint of this point (--resume continues from the last one)"));
}

void Trainer::train_to_stop(FitResult& res, const std::function<EpochRecord(int64_t, bool)>& run_epoch,
                            const std::string& who) {
  int64_t epoch = start_epoch_;
  bool stopped_here = false;  // the stop fell in this process (not restored from a checkpoint)
  for (; epoch < cfg_.stop.max_epochs; ++epoch) {
    const EpochRecord r = run_epoch(epoch, /*extra=*/false);
    const bool plateau = plateau_.update(r.train_loss);
    const bool last = epoch + 1 == cfg_.stop.max_epochs;
    // Which rule ended the stage is said as it happens: a stage's length is
    // what an MRMF study compares, and the epoch lines alone do not say it.
    if (cfg_.stop.target_val_loss > 0 && r.val_loss <= cfg_.stop.target_val_loss) {
      res.stop_reason = "target";
      res.reached_target = true;
      log::info("{}reached the target validation loss {:g} in epoch {} ({:.5f})", who, cfg_.stop.target_val_loss,
                epoch, r.val_loss);
    } else if (plateau) {
      res.stop_reason = "plateau";
      log::info("{}stopped by its plateau rule after epoch {}: the training loss fell by less than {:g}{} in {} "
                "epoch(s) in a row", who, epoch, cfg_.stop.plateau_threshold,
                cfg_.stop.plateau_reference == "best" ? " below its lowest value" : "", cfg_.stop.plateau_patience);
    } else if (last) {
      res.stop_reason = "max_epochs";
    }
    const bool every = cfg_.train.checkpoint_every > 0 && (epoch + 1) % cfg_.train.checkpoint_every == 0;
    if (every || !res.stop_reason.empty() || stop_seen_) save(epoch + 1);
    // A stop signal in the epoch's last step: the epoch is complete and saved.
    // A run its own rule ended anyway finishes normally.
    if (stop_seen_ && res.stop_reason.empty()) stop_for_signal(true);
    if (!res.stop_reason.empty()) {
      ++epoch;
      stopped_here = true;
      break;
    }
  }
  if (res.stop_reason.empty()) res.stop_reason = "max_epochs";  // resumed at or past the end
  if (res.stop_reason == "max_epochs" && (cfg_.stop.target_val_loss > 0 || plateau_.enabled()))
    log::info("{}stopped by the epoch guard ({} epochs) before its {} fired", who, cfg_.stop.max_epochs,
              cfg_.stop.target_val_loss > 0 ? "target validation loss" : "plateau rule");
  // Past the stop, while the caller asks for more (the stop reason stays).
  // Only when the stop fell in this process: a stage restored as stopped
  // (or restored inside such epochs) ends there, so its extra epochs are
  // never counted twice or as ordinary ones.
  for (; stopped_here && opts_.after_stop && opts_.after_stop(); ++epoch) {
    const EpochRecord r = run_epoch(epoch, /*extra=*/true);
    ++res.overtime_epochs;
    save(epoch + 1);
    if (stop_seen_) stop_for_signal(true);
    if (r.cut_short) {
      log::info("{}extra epoch {} ended after {} step(s): no longer waited for", who, epoch, r.steps);
      break;
    }
  }
}

}  // namespace mrmf
