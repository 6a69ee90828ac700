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
  MRMF_CHECK_KIND(Usage, f.init_groups.empty() || !cfg.train.init.empty(),
                  "--init-groups ", f.init_groups, " without --init (or train.init): which checkpoint should it load?");
  Communicator world = Communicator::world();
  // A folder holding a run is continued (--resume) or replaced (--force),
  // never silently overwritten: metrics.jsonl would be truncated and the
  // old checkpoint taken for this run's "last good" one.
  const std::vector<std::string> results = {"checkpoint.h5", "metrics.jsonl", "summary.json"};
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
  // --force: the earlier run's files go only now, once this run has been
  // set up (its data opened, its --init read -- possibly from this very
  // folder), so that a run that cannot start loses nothing.
  if (f.force && !f.resume) {
    if (world.is_root())
      for (const auto& r : results) std::filesystem::remove(std::filesystem::path(f.out) / r);
    world.barrier();
  }
  log::info("training {} on {} rank(s), {} samples per rank per epoch, global batch {}", trainer.spec().str(),
            world.size(), trainer.train_loader().samples_per_epoch(), cfg.train.batch_size * world.size());
  const FitResult res = trainer.fit();

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
    std::ofstream(std::filesystem::path(f.out) / "summary.json") << s.dump(2) << "\n";
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
  sub->add_option("--out,-o", flags->out, "Output folder: metrics.jsonl, summary.json, checkpoint.h5")->required()->check(non_empty());
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
