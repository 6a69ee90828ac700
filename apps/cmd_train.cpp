// `mrmf train`: one training run from a YAML config (+ --set overrides).
// Launch with `mpirun -np N mrmf train ...` or `srun`; one rank per GPU.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/log.h"
#include "data/h5file.h"
#include "fusion/trainer.h"

namespace mrmf::cli {
namespace {
struct TrainFlags {
  std::string config, out;
  std::vector<std::string> sets;
  bool resume = false;
  bool force = false;
  std::string init, init_groups, freeze;
  RuntimeFlags rt;
};

int run_train(const TrainFlags& f) {
  std::vector<std::string> sets = f.sets;
  if (!f.init.empty()) sets.push_back("train.init=" + f.init);
  if (!f.init_groups.empty()) sets.push_back("train.init_groups=" + f.init_groups);
  if (!f.freeze.empty()) sets.push_back("train.freeze=" + f.freeze);
  RunConfig cfg = load_run_config(f.config, sets);  // all config errors before any compute
  MRMF_CHECK_KIND(Usage, f.init_groups.empty() || !cfg.train.init.empty(), "--init-groups ", f.init_groups,
                  " without --init (or train.init): which checkpoint should it load?");
  Communicator world = Communicator::world();
  // A folder holding a run is continued (--resume) or replaced (--force),
  // never silently overwritten: metrics.jsonl would be truncated and the
  // old checkpoint taken for this run's "last good" one.
  const std::vector<std::string> results = {"checkpoint.h5", "metrics.jsonl", "summary.json"};
  MRMF_CHECK_KIND(Usage, !(f.resume && f.force),
                  "--resume and --force contradict each other: --resume continues the "
                  "run in ",
                  f.out, ", --force replaces it");
  {
    // --resume where a run left metrics but no checkpoint (written with
    // checkpoints off, or the checkpoint removed) would start over and
    // truncate those metrics: said instead. (An empty metrics.jsonl -- a run
    // that died in its first epoch -- has nothing to lose: it starts over.)
    std::error_code ec;
    const std::filesystem::path o(f.out);
    const bool metrics =
        std::filesystem::exists(o / "metrics.jsonl", ec) && std::filesystem::file_size(o / "metrics.jsonl", ec) > 0;
    MRMF_CHECK_KIND(Usage,
                    !f.resume || std::filesystem::exists(o / "checkpoint.h5", ec) ||
                        !(metrics || std::filesystem::exists(o / "summary.json", ec)),
                    "--resume: ", f.out,
                    " holds a run's metrics but no checkpoint.h5 to continue from; --force "
                    "starts over (replacing them), or choose another --out",
                    std::filesystem::exists(o / "previous_run", ec)
                        ? " (the run an earlier --force set aside is in previous_run/)"
                        : "");
  }
  refuse_existing_results(f.out, results, f.resume || f.force,
                          "--resume continues that run, --force starts over and replaces it, or choose another --out",
                          world);
  RuntimeFlags rt = f.rt;
  if (rt.device.empty()) rt.device = cfg.runtime.device;
  if (rt.threads == 0) rt.threads = static_cast<int>(cfg.runtime.threads);
  apply_runtime_flags(rt);
  RuntimeOptions ro;
  ro.device = rt.device;
  const Device device = select_device(ro);

  TrainerOptions to;
  to.out_dir = f.out;
  to.resume = f.resume;
  Trainer trainer(cfg, world, device, to);
  // --force: the earlier run's files move aside only now, once this run has
  // been set up (its data opened, its --init read -- possibly from this very
  // folder), into <out>/previous_run, and are deleted only when this run has
  // finished. If this run fails before it has a checkpoint and a finished
  // epoch (a NaN in epoch 0), rank 0 puts them back; if it is killed (a
  // crash, a time limit, another rank's error), the next --force finds them
  // in previous_run and keeps them there instead of this run's leftovers.
  namespace fs = std::filesystem;
  const fs::path out(f.out), prev = out / "previous_run";
  const bool set_aside = f.force && !f.resume;
  // This run's own progress: a checkpoint, or a finished epoch in its metrics.
  const auto has_progress = [&] {
    std::error_code ec;
    if (fs::exists(out / "checkpoint.h5", ec)) return true;
    std::ifstream m(out / "metrics.jsonl");
    std::string line;
    return static_cast<bool>(std::getline(m, line)) && !line.empty();
  };
  if (set_aside) {
    if (world.is_root()) {
      if (fs::exists(prev) && !has_progress()) {
        // An earlier --force attempt died before it got anywhere: the run
        // in previous_run is still the one to keep; the attempt's files go.
        log::info(
            "{} holds the run an earlier --force attempt set aside (that attempt never finished an epoch): "
            "kept there until this run finishes",
            prev.string());
        for (const auto& r : results) fs::remove(out / r);
      } else {
        fs::remove_all(prev);
        fs::create_directories(prev);
        for (const auto& r : results)
          if (fs::exists(out / r)) fs::rename(out / r, prev / r);
      }
    }
    world.barrier();
  }
  log::info("training {} on {} rank(s), {} samples per rank per epoch, global batch {}", trainer.spec().str(),
            world.size(), trainer.train_loader().samples_per_epoch(), cfg.train.batch_size * world.size());
  FitResult res;
  try {
    res = trainer.fit();
  } catch (...) {
    std::error_code ec;
    if (set_aside && world.is_root()) {
      if (!has_progress()) {
        for (const auto& r : results) {
          fs::remove(out / r, ec);
          if (fs::exists(prev / r, ec)) fs::rename(prev / r, out / r, ec);
        }
        fs::remove_all(prev, ec);
        log::info("this run failed before its first epoch or checkpoint: the earlier run's files in {} are restored",
                  f.out);
      } else {
        log::info(
            "this run failed after it had made progress (its files stay for a look or --resume); the earlier "
            "run's files are in {}",
            prev.string());
      }
    }
    throw;
  }

  if (world.is_root()) {
    // The whole run, also when this process resumed it.
    const int64_t epochs = res.resumed_epochs + res.epochs();
    const double time_s = res.resumed_s + res.total_s;
    nlohmann::json s;
    s["model"] = trainer.spec().str();
    s["ranks"] = world.size();
    s["device"] = device.str();
    s["epochs"] = epochs;
    s["epochs_this_process"] = res.epochs();
    s["resumed"] = res.resumed_epochs > 0;
    s["stop_reason"] = res.stop_reason;
    s["reached_target"] = res.reached_target;
    s["final_val_loss"] = res.final_val_loss;
    s["train_time_s"] = time_s;
    s["parameters"] = trainer.model().params().num_parameters();
    data::write_text_atomically((out / "summary.json").string(), s.dump(2) + "\n");
    if (set_aside) fs::remove_all(prev);  // replaced by a finished run
    log::info("done: {} epochs, stop: {}, final val loss {:.5f}, {:.1f} s; wrote {}/{{metrics.jsonl,summary.json,"
              "checkpoint.h5}}",
              epochs, res.stop_reason, res.final_val_loss, time_s, f.out);
  }
  return 0;
}
}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<TrainFlags>();
  auto* sub = app.add_subcommand("train", "Train a model from a YAML config (data-parallel under mpirun/srun)");
  sub->add_option("--config,-c", flags->config, "YAML configuration (see configs/)")->required()->check(CLI::ExistingFile);
  sub->add_option("--out,-o", flags->out, "Output folder: metrics.jsonl, summary.json, checkpoint.h5")
      ->required()
      ->check(non_empty());
  sub->add_option("--set", flags->sets, "Override a config key: --set train.epochs=5 (repeatable)");
  sub->add_flag("--resume", flags->resume, "Continue from <out>/checkpoint.h5 if it exists");
  sub->add_flag("--force", flags->force, "Replace the run already in --out (without it, such a folder is refused)");
  sub->add_option("--init", flags->init, "Start from another run's checkpoint")->check(CLI::ExistingFile);
  sub->add_option("--init-groups", flags->init_groups, "Which groups --init loads: all, bottom or top");
  sub->add_option("--freeze", flags->freeze, "Freeze a parameter group: bottom or top");
  add_runtime_flags(*sub, flags->rt);
  sub->callback([flags, &action] { action = [flags] { return run_train(*flags); }; });
}

}  // namespace mrmf::cli
