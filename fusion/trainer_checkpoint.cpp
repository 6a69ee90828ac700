// What a training run leaves on disk and takes back: each epoch's metrics
// line, the checkpoint (every rank's BN statistics gathered mid-epoch, the
// loader's position, the optimizer's state), and resuming from it
// (fusion/trainer.h; the training loop is in fusion/trainer.cpp).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <variant>

#include "core/check_mpi.h"
#include "core/log.h"
#include "core/nvtx.h"
#include "core/version.h"
#include "data/h5file.h"
#include "fusion/checkpoint.h"
#include "fusion/trainer.h"

namespace mrmf {
namespace fs = std::filesystem;

std::vector<std::string> Trainer::trained_by() const {
  std::vector<std::string> builds = trained_before_;
  if (step_ > resumed_step_ && (builds.empty() || builds.back() != build_version())) builds.push_back(build_version());
  return builds;
}

void Trainer::write_metrics(const EpochRecord& r) {
  if (opts_.out_dir.empty() || !comm_.is_root()) return;
  const fs::path mp = fs::path(opts_.out_dir) / "metrics.jsonl";
  std::ofstream f(mp, std::ios::app);
  f << r.to_json() << "\n";
  f.flush();
  MRMF_CHECK_KIND(Data, f.good(), mp.string(), ": cannot append epoch ", r.epoch,
                  "'s metrics (disk or quota full? not a writable file?)");
}

void Trainer::save(int64_t epochs_done, int64_t batch, double loss_sum) {
  if (opts_.out_dir.empty() || !opts_.write_checkpoints) return;
  // Inside an epoch each rank's BN running statistics are its own (they are
  // averaged at the epoch's end): rank 0 gathers them all (every rank calls
  // save at the same step), so that a resume continues bit for bit.
  Tensor rank_buffers;
  const Tensor buf = model_->params().buffers();
  if (batch > 0 && comm_.size() > 1 && buf.numel() > 0) {
    const Tensor mine = buf.device().is_cuda() ? buf.to(Device::cpu(), ctx_->stream()) : buf.contiguous();
    ctx_->stream().synchronize();
    if (comm_.is_root()) rank_buffers = Tensor::empty({comm_.size(), buf.numel()});
    MRMF_MPI_CHECK(MPI_Gather(mine.raw_data(), static_cast<int>(buf.numel()), MPI_FLOAT,
                              comm_.is_root() ? rank_buffers.raw_data() : nullptr, static_cast<int>(buf.numel()),
                              MPI_FLOAT, 0, comm_.native()));
  }
  if (!comm_.is_root()) return;
  MRMF_NVTX_RANGE("checkpoint");
  // Test hook (tests/mpi/multirank_consistency.sh): MRMF_FAULT_SLOW_SAVE_MS=N
  // makes each checkpoint take N ms longer, as a large model's on a slow
  // file system, while the other ranks go on.
  // Read once, as the trainer's other fault hooks are.
  static const long slow_ms = [] {
    const char* v = std::getenv("MRMF_FAULT_SLOW_SAVE_MS");
    return v ? std::atol(v) : 0L;
  }();
  if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
  TrainingState ts;
  ts.epoch = epochs_done;
  ts.step = step_;
  ts.config = cfg_.text;
  ts.trained_by = trained_by();
  ts.state["loader_epoch"] = epochs_done;
  ts.state["loader_batch"] = batch;
  ts.state["world"] = static_cast<int64_t>(comm_.size());  // the order of a mid-epoch resume depends on it
  ts.state["epoch_loss_sum"] = loss_sum;
  if (batch > 0)  // the time this epoch has cost so far, in this and earlier processes
    ts.state["epoch_elapsed_s"] =
        epoch_earlier_s_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_t0_).count();
  ts.state["plateau_count"] = plateau_.count();
  ts.state["plateau_has_prev"] = int64_t{plateau_.has_previous() ? 1 : 0};
  ts.state["plateau_prev"] = plateau_.previous();
  ts.state["last_val_loss"] = last_val_loss_;
  // Not in an experiment's stages: the experiment's identity holds the data's fingerprint.
  if (opts_.check_data_identity) ts.state["data_fingerprint"] = static_cast<int64_t>(data_hash_);
  SaveOptions so;
  so.stream = &ctx_->stream();
  so.rank_buffers = rank_buffers;
  save_checkpoint(checkpoint_path(), spec_, *model_, opt_.get(), sched_.get(), ts, so);
}

std::string Trainer::checkpoint_path() const { return (fs::path(opts_.out_dir) / "checkpoint.h5").string(); }

bool Trainer::try_resume() {
  const fs::path ck = checkpoint_path();
  if (!opts_.resume || opts_.out_dir.empty() || !fs::exists(ck)) return false;
  const CheckpointHeader h = read_checkpoint_header(ck.string());
  // The stop conditions, checkpoint interval and runtime may change on resume
  // (e.g. to extend a run); everything that shapes the training may not.
  std::vector<std::string> keep = {
      "stop.max_epochs=" + std::to_string(cfg_.stop.max_epochs),
      "stop.target_val_loss=" + fmt::format("{}", cfg_.stop.target_val_loss),
      "stop.plateau_threshold=" + fmt::format("{}", cfg_.stop.plateau_threshold),
      "stop.plateau_patience=" + std::to_string(cfg_.stop.plateau_patience),
      "stop.min_epochs=" + std::to_string(cfg_.stop.min_epochs),
      "stop.plateau_reference=" + cfg_.stop.plateau_reference,
      "train.checkpoint_every=" + std::to_string(cfg_.train.checkpoint_every),
      "train.checkpoint_every_steps=" + std::to_string(cfg_.train.checkpoint_every_steps),
      "runtime.device=" + (cfg_.runtime.device.empty() ? std::string("''") : cfg_.runtime.device),
      "runtime.threads=" + std::to_string(cfg_.runtime.threads),
      std::string("runtime.allow_tf32=") + (cfg_.runtime.allow_tf32 ? "true" : "false"),
      std::string("runtime.cudnn_benchmark=") + (cfg_.runtime.cudnn_benchmark ? "true" : "false"),
      "runtime.cudnn_workspace_mb=" + std::to_string(cfg_.runtime.cudnn_workspace_mb)};
  const RunConfig old = parse_run_config(h.training.config, keep, ck.string());
  if (old.text != cfg_.text) {
    std::string diff;
    for (const auto& d : config_differences(old.text, cfg_.text)) diff += "\n  " + d;
    MRMF_THROW(Config, "--resume: ", ck.string(),
               " was written with a different configuration (only stop.*, train.checkpoint_every and runtime.* may "
               "change on resume); checkpoint -> this run:",
               diff);
  }
  // A training-state number; `fallback` where older checkpoints lack it (none: required).
  auto num = [&](const char* k, std::optional<double> fallback = std::nullopt) -> double {
    auto it = h.training.state.find(k);
    if (it == h.training.state.end() && fallback) return *fallback;
    MRMF_CHECK_KIND(Data, it != h.training.state.end(), ck.string(), ": missing training state '", k, "'");
    return std::visit([](auto v) { return static_cast<double>(v); }, it->second);
  };
  // The configuration names the data by path: regenerated data there, or a
  // relative path from another folder, trained on silently (older
  // checkpoints lack the fingerprint).
  if (const auto it = h.training.state.find("data_fingerprint");
      opts_.check_data_identity && it != h.training.state.end()) {
    const int64_t* then = std::get_if<int64_t>(&it->second);
    MRMF_CHECK_KIND(Config, then && static_cast<uint64_t>(*then) == data_hash_, "--resume: the data (",
                    data_spec(cfg_, data::Split::Train).path, ", train and val splits) are not those ", ck.string(),
                    " was trained on (their sizes or first labels differ: regenerated, or a relative data.path "
                    "from another folder); point data.path at the original data, or --force to start over");
  }
  // A checkpoint from inside an epoch that stop.max_epochs does not reach:
  // the run would end at once, "done" with the weights of a partial epoch.
  // Damaged counts resumed silently (loader_batch -3 as 0); checked before
  // any is cast to an integer.
  for (const char* k : {"loader_batch", "loader_epoch", "plateau_count"})
    MRMF_CHECK_KIND(Data, num(k, 0.0) >= 0 && num(k, 0.0) < 9.2e18, ck.string(), ": training state '", k, "' is ",
                    num(k, 0.0), ", expected a count >= 0: is the checkpoint damaged?");
  const int64_t batch_then = static_cast<int64_t>(num("loader_batch"));
  MRMF_CHECK_KIND(Config, batch_then <= 0 || h.training.epoch < cfg_.stop.max_epochs, "--resume: ", ck.string(),
                  " was written inside epoch ", h.training.epoch + 1, " (after its batch ", batch_then,
                  "), which stop.max_epochs ", cfg_.stop.max_epochs,
                  " does not reach: its weights are those of a partial epoch. Give stop.max_epochs at least ",
                  h.training.epoch + 1);
  ParamLoadOptions lo;
  lo.stream = &ctx_->stream();
  load_params(ck.string(), *model_, lo);
  load_optimizer_state(ck.string(), *opt_, &ctx_->stream());
  load_scheduler_state(ck.string(), *sched_);
  start_epoch_ = h.training.epoch;
  step_ = h.training.step;
  resumed_step_ = h.training.step;
  trained_before_ = h.training.trained_by;
  if (trained_before_.empty() && resumed_step_ > 0) trained_before_.push_back("an earlier build (not recorded)");
  ctx_->set_step(static_cast<uint64_t>(step_));
  plateau_.restore(static_cast<int64_t>(num("plateau_count")), num("plateau_has_prev") != 0, num("plateau_prev"),
                   h.training.epoch);
  resume_batch_ = batch_then;
  // A mid-epoch checkpoint: the epoch's time so far was spent on the stage
  // (absent in checkpoints written before it was recorded).
  resume_earlier_s_ = resume_batch_ > 0 ? num("epoch_elapsed_s", 0.0) : 0.0;
  const int64_t world_then = static_cast<int64_t>(num("world", static_cast<double>(comm_.size())));
  if (resume_batch_ > 0 && world_then != comm_.size()) {
    // Each rank's shard and order depend on the rank count: the interrupted
    // epoch's remaining batches are not those of this launch. The epoch
    // starts over instead (its finished batches' loss is dropped).
    log::info(
        "{}notice: {} was written in the middle of epoch {} by {} rank(s); with {} this epoch starts again from "
        "its first batch",
        opts_.tag.empty() ? "" : opts_.tag + ": ", ck.string(), h.training.epoch, world_then, comm_.size());
    resume_batch_ = 0;
  }
  resume_loss_sum_ =
      resume_batch_ > 0 ? num("epoch_loss_sum", 0.0) : 0.0;  // absent before mid-epoch checkpoints existed
  // Inside an epoch: this rank's own BN running statistics, where the
  // checkpoint has them (written by as many ranks).
  if (resume_batch_ > 0 && comm_.size() > 1)
    load_rank_buffers(ck.string(), *model_, comm_.rank(), comm_.size(), &ctx_->stream());
  resumed_val_known_ = h.training.state.count("last_val_loss") > 0;  // absent in older checkpoints
  last_val_loss_ = num("last_val_loss", 0.0);
  // Keep the metrics of the epochs the checkpoint covers; drop later ones
  // (they belonged to the interrupted run and will be recomputed).
  if (comm_.is_root()) {
    const fs::path mp = fs::path(opts_.out_dir) / "metrics.jsonl";
    std::vector<std::string> keep;
    std::ifstream in(mp);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || j.value("epoch", int64_t{-1}) >= start_epoch_) continue;
      keep.push_back(line);
      ++resumed_epochs_;
      resumed_s_ += j.value("epoch_s", 0.0) + j.value("earlier_s", 0.0);
      try {
        resumed_history_.push_back(EpochRecord::from_json(j));
      } catch (const nlohmann::json::exception&) {
        // a line of an older format: counted, its record left out of the history
      }
      if (const auto v = j.find("val_loss"); v != j.end() && v->is_number())  // NaN is written as null
        resumed_val_loss_ = v->get<double>();
    }
    in.close();
    // Rewritten whole or not at all: a process killed here must not leave
    // fewer epochs than the checkpoint covers.
    std::string text;
    for (const auto& l : keep) text += l + "\n";
    data::write_text_atomically(mp.string(), text);
    // `mrmf train` writes summary.json when a run finishes: the one there
    // describes fewer epochs than this checkpoint will once training goes
    // on, and stayed so when the resumed process was killed.
    std::error_code ec;
    fs::remove(fs::path(opts_.out_dir) / "summary.json", ec);
    if (resumed_epochs_ != start_epoch_) {
      // Lines lost or damaged: the checkpoint's count is the truth.
      log::info("{}notice: {} holds {} readable record(s) of the {} epoch(s) {} covers; the run counts {}",
                opts_.tag.empty() ? "" : opts_.tag + ": ", mp.string(), resumed_epochs_, start_epoch_, ck.string(),
                start_epoch_);
      resumed_epochs_ = start_epoch_;
    }
  }
  resumed_s_ += resume_earlier_s_;  // the interrupted epoch's part before the checkpoint
  log::info("{}resumed from {} at epoch {}{} (step {})", opts_.tag.empty() ? "" : opts_.tag + ": ", ck.string(),
            start_epoch_, resume_batch_ > 0 ? fmt::format(", batch {}", resume_batch_) : "", step_);
  return true;
}

}  // namespace mrmf
