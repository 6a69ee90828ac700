// `mrmf train`: one training run from a YAML config (+ --set overrides).
// Launch with `mpirun -np N mrmf train ...` or `srun`; one rank per GPU.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/log.h"
#include "core/output_paths.h"
#include "core/run_lock.h"
#include "core/version.h"
#include "data/h5file.h"
#include "fusion/stop_rules.h"
#include "fusion/trainer.h"

namespace mrmf::cli {
namespace {
namespace fs = std::filesystem;

struct TrainFlags {
  std::string config, out;
  std::vector<std::string> sets;
  bool resume = false;
  bool force = false;
  bool check = false;
  std::string init, init_groups, freeze;
  RuntimeFlags rt;
};

// The run a --force replaces: its files (`results` in `out`) move into
// <out>/previous_run and are deleted only when the new run has finished. If
// the new run fails before it has a checkpoint or a finished epoch (a NaN in
// epoch 0), they come back; if it is killed (a crash, a time limit, another
// rank's error), the next --force finds them in previous_run and keeps them
// there instead of the killed attempt's leftovers -- also where that attempt
// had progressed, when previous_run holds a finished run (a summary.json)
// and the attempt did not finish: a finished run is never deleted for an
// unfinished one. The files move through <out>/.previous_run.new, renamed
// whole, so that a kill between two moves loses nothing (the next command
// moves them back first). Rank 0 moves the files.
class EarlierRun {
 public:
  static constexpr const char* kStaging = ".previous_run.new";  // in `out`
  EarlierRun(const std::string& out, const std::vector<std::string>& results, const Communicator& world, bool active)
      : out_(out), prev_(out_ / "previous_run"), results_(results), root_(world.is_root()), active_(active) {
    if (!active_) return;
    if (root_) {
      recover_interrupted_move(out_, results_);
      const bool keep_earlier = fs::exists(prev_) && (!new_run_progressed() || (finished(prev_) && !finished(out_)));
      if (keep_earlier) {
        log::info("{} holds the run an earlier --force set aside ({}): kept there until this run finishes",
                  prev_.string(),
                  new_run_progressed() ? "the attempt since never finished" : "that attempt never finished an epoch");
        for (const auto& r : results_) fs::remove(out_ / r);
      } else {
        const fs::path staging = out_ / kStaging;
        fs::create_directories(staging);
        for (const auto& r : results_)
          if (fs::exists(out_ / r)) fs::rename(out_ / r, staging / r);
        fs::remove_all(prev_);
        fs::rename(staging, prev_);
      }
    }
    world.barrier();
  }
  // Files a --force killed while it moved them aside: back into `out`
  // (where it still holds the same name, the file in `out` is the newer).
  static void recover_interrupted_move(const fs::path& out, const std::vector<std::string>& results) {
    const fs::path staging = out / kStaging;
    std::error_code ec;
    if (!fs::exists(staging, ec)) return;
    for (const auto& r : results)
      if (fs::exists(staging / r, ec) && !fs::exists(out / r, ec)) fs::rename(staging / r, out / r);
    fs::remove_all(staging);
  }
  // The new run failed (an exception on this rank): put the earlier files
  // back unless the new run has something of its own to look at or resume.
  void after_failure() const noexcept {
    if (!active_ || !root_) return;
    std::error_code ec;
    if (new_run_progressed()) {
      log::info(
          "this run failed after it had made progress (its files stay for a look or --resume); the earlier "
          "run's files are in {}",
          prev_.string());
      return;
    }
    for (const auto& r : results_) fs::remove(out_ / r, ec);
    // Back through the staging folder, renamed whole first: a kill among
    // the moves below leaves the rest there, where the next command takes
    // them from (recover_interrupted_move), not split between two folders.
    const fs::path from = out_ / kStaging;
    fs::rename(prev_, from, ec);
    const fs::path& src = ec ? prev_ : from;
    for (const auto& r : results_)
      if (fs::exists(src / r, ec)) fs::rename(src / r, out_ / r, ec);
    fs::remove_all(src, ec);
    log::info("this run failed before its first epoch or checkpoint: the earlier run's files in {} are restored",
              out_.string());
  }

 private:
  static bool finished(const fs::path& dir) noexcept {
    std::error_code ec;
    return fs::exists(dir / "summary.json", ec);
  }
  // A checkpoint, or a finished epoch in the metrics.
  bool new_run_progressed() const noexcept {
    std::error_code ec;
    if (fs::exists(out_ / "checkpoint.h5", ec)) return true;
    std::ifstream m(out_ / "metrics.jsonl");
    std::string line;
    return static_cast<bool>(std::getline(m, line)) && !line.empty();
  }
  fs::path out_, prev_;
  std::vector<std::string> results_;
  bool root_, active_;
};

int run_train(const TrainFlags& f) {
  std::vector<std::string> sets = f.sets;
  if (!f.init.empty()) sets.push_back("train.init=" + yaml_quoted(f.init));
  if (!f.init_groups.empty()) sets.push_back("train.init_groups=" + yaml_quoted(f.init_groups));
  if (!f.freeze.empty()) sets.push_back("train.freeze=" + yaml_quoted(f.freeze));
  RunConfig cfg = load_run_config(f.config, sets);  // all config errors before any compute
  MRMF_CHECK_KIND(Usage, f.init_groups.empty() || !cfg.train.init.empty(), "--init-groups ", f.init_groups,
                  " without --init (or train.init): which checkpoint should it load?");
  Communicator world = Communicator::world();
  // A guard shorter than the plateau rule's first chance always wins.
  // Allowed (a fixed-length run keeps its rule for later), but said, as an
  // experiment's stages say it.
  const auto& st = cfg.stop;
  if (!PlateauRule(st.plateau_threshold, st.plateau_patience, st.min_epochs).can_fire_within(st.max_epochs) &&
      world.is_root())
    log::info(
        "notice: the plateau rule (stop.plateau_threshold {}, patience {}, min_epochs {}) cannot fire within "
        "stop.max_epochs {}; the epoch guard will end this run",
        st.plateau_threshold, st.plateau_patience, st.min_epochs, st.max_epochs);
  // A folder holding a run is continued (--resume) or replaced (--force),
  // never silently overwritten: metrics.jsonl would be truncated and the
  // old checkpoint taken for this run's "last good" one.
  const std::vector<std::string> results = {"checkpoint.h5", "metrics.jsonl", "summary.json"};
  MRMF_CHECK_KIND(Usage, !(f.resume && f.force),
                  "--resume and --force contradict each other: --resume continues the run in ", f.out,
                  ", --force replaces it");
  // A --force rank sets the earlier run aside behind a barrier the others
  // never reach, and a --resume rank compares checkpoint state the others
  // do not send: a hang that SIGTERM cannot end (no step is reached).
  agree_on_all_ranks(f.resume  ? "--resume"
                     : f.force ? "--force"
                               : "neither --resume nor --force",
                     "--resume / --force", world);
  // What --out holds already: a checkpoint, and a run an earlier --force set aside.
  std::error_code ec;
  const fs::path o(f.out);
  // Files a killed --force was moving aside (in .previous_run.new) count as
  // here: they are moved back once this command holds the folder's lock.
  const fs::path staging = o / EarlierRun::kStaging;
  const bool has_checkpoint = fs::exists(o / "checkpoint.h5", ec) || fs::exists(staging / "checkpoint.h5", ec),
             set_aside = fs::exists(o / "previous_run", ec);
  {
    // --resume where a run left metrics but no checkpoint (written with
    // checkpoints off, or the checkpoint removed) would start over and
    // truncate those metrics: said instead. (An empty metrics.jsonl -- a run
    // that died in its first epoch -- has nothing to lose: it starts over.)
    const bool metrics = (fs::exists(o / "metrics.jsonl", ec) && fs::file_size(o / "metrics.jsonl", ec) > 0) ||
                         fs::exists(staging / "metrics.jsonl", ec);
    MRMF_CHECK_KIND(Usage, !f.resume || has_checkpoint || !(metrics || fs::exists(o / "summary.json", ec)),
                    "--resume: ", f.out,
                    " holds a run's metrics but no checkpoint.h5 to continue from; --force starts over (replacing "
                    "them), or choose another --out",
                    set_aside ? " (the run an earlier --force set aside is in previous_run/)" : "");
  }
  refuse_inputs_among_results(f.out, results,
                              {{"--config", f.config},
                               {"data.path", cfg.data.path},
                               {"data.train_files", cfg.data.train_files},
                               {"data.val_files", cfg.data.val_files},
                               {"data.test_files", cfg.data.test_files}});
  std::vector<std::string> present = results;
  present.push_back(EarlierRun::kStaging);
  refuse_existing_results(f.out, present, f.resume || f.force,
                          std::string("--resume continues that run, --force starts over and replaces it, or choose "
                                      "another --out") +
                              (set_aside ? " (the run an earlier --force set aside is in previous_run/)" : ""),
                          world);
  // train.init (--init, or the config's) is read unless this run resumes
  // from its own checkpoint -- which needs it no more (it may be gone).
  if (!cfg.train.init.empty() && !(f.resume && has_checkpoint)) {
    const fs::path init(cfg.train.init), ours = o / "checkpoint.h5", theirs = o / "previous_run" / "checkpoint.h5";
    const bool is_ours = same_file(init.string(), ours.string());
    const bool in_prev = is_ours && fs::exists(theirs, ec);
    const bool staged = is_ours && fs::exists(staging / "checkpoint.h5", ec);
    MRMF_CHECK_KIND(Usage, fs::exists(init, ec), "--init (train.init) ", cfg.train.init, ": no such file",
                    in_prev  ? " (the run an earlier --force set aside has one: " + theirs.string() + ")"
                    : staged ? " (a --force killed while it set the run aside left it in " + staging.string() +
                                   "; the next command in this folder, --resume say, moves it back)"
                             : "");
    // A --force re-run of `--force --init <out>/checkpoint.h5` after an
    // interrupted attempt would start from that attempt's checkpoint.
    MRMF_CHECK_KIND(Usage,
                    !(f.force && in_prev && fs::exists(o / "previous_run" / "summary.json", ec) &&
                      !fs::exists(o / "summary.json", ec)),
                    "--init ", cfg.train.init,
                    " is the checkpoint of an interrupted --force attempt, which never "
                    "finished; the finished run it was to replace is in ",
                    theirs.string(), ": give that to --init");
  }
  if (f.resume && set_aside && !has_checkpoint && world.is_root())
    log::warn(
        "--resume: {} has no checkpoint.h5 of its own, so this run starts over; the run an earlier --force set "
        "aside is in {}/previous_run",
        f.out, f.out);
  // One command a folder (core/run_lock.h); --check writes nothing, so it
  // neither takes the lock nor tidies the folder.
  std::optional<RunFolderLock> lock;
  if (!f.check) {
    lock.emplace(f.out, world);
    lock->remove_partial_files();
    if (world.is_root()) EarlierRun::recover_interrupted_move(o, results);  // a --force killed while moving files
  }
  RuntimeFlags rt = f.rt;
  if (rt.device.empty()) rt.device = cfg.runtime.device;
  if (rt.threads == 0) rt.threads = static_cast<int>(cfg.runtime.threads);
  apply_runtime_flags(rt);
  RuntimeOptions ro;
  ro.device = rt.device;
  const Device device = select_device(ro);
  if (f.check) {
    // Ranks given different configurations: the run refuses them, so the check must too.
    check_same_config(world, cfg);
    // What an experiment checks of each stage before training
    // (fusion/preflight.cpp). A run that resumes from its own checkpoint
    // does not read --init (which may be gone): neither does its check.
    RunConfig checked = cfg;
    if (f.resume && has_checkpoint) checked.train.init.clear();
    ModelSpec spec;
    auto model = check_run_before_training(checked, world, world.size(), device, &spec, nullptr);
    if (world.is_root())
      std::printf(
          "%s\n%s\nchecked: the configuration, the train and val data (%d rank(s), batch %lld per rank), "
          "the model%s; nothing was trained or written%s\n",
          spec.str().c_str(), describe(*model).c_str(), world.size(), static_cast<long long>(cfg.train.batch_size),
          checked.train.init.empty() ? "" : " and --init",
          f.resume ? " (--resume compares its checkpoint with this configuration when the run starts)" : "");
    return 0;
  }

  TrainerOptions to;
  to.out_dir = f.out;
  to.resume = f.resume;
  Trainer trainer(cfg, world, device, to);
  // --force: the earlier run's files move aside only now, once this run has
  // been set up (its data opened, its --init read -- possibly from this very
  // folder); see EarlierRun.
  EarlierRun earlier(f.out, results, world, f.force && !f.resume);
  log::info("training {} on {} rank(s), {} samples per rank per epoch, global batch {}", trainer.spec().str(),
            world.size(), trainer.train_loader().samples_per_epoch(), cfg.train.batch_size * world.size());
  FitResult res;
  try {
    res = trainer.fit();
  } catch (...) {
    earlier.after_failure();
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
    s["mrmf"] = build_version();             // the build that wrote this summary
    s["trained_by"] = trainer.trained_by();  // the builds that trained the run, oldest first
    s["epochs"] = epochs;
    s["epochs_this_process"] = res.epochs();
    s["resumed"] = res.resumed_epochs > 0;
    s["stop_reason"] = res.stop_reason;
    s["reached_target"] = res.reached_target;
    s["final_val_loss"] = res.final_val_loss;
    s["train_time_s"] = time_s;
    s["parameters"] = trainer.model().params().num_parameters();
    data::write_text_atomically((fs::path(f.out) / "summary.json").string(), s.dump(2) + "\n");
    // Replaced by a finished run: also one that --resume finished (an
    // attempt a --force started, killed and then resumed), else the next
    // --force would keep the older run and drop this one.
    fs::remove_all(fs::path(f.out) / "previous_run", ec);
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
  // Not CLI::ExistingFile: --resume of a run started with --init needs the file no more.
  sub->add_option("--init", flags->init, "Start from another run's checkpoint")->check(non_empty());
  sub->add_option("--init-groups", flags->init_groups,
                  "Which groups --init loads: all, bottom or top; resample: all of a checkpoint at another resolution, "
                  "the layers on the flattened features resampled")
      ->check(non_empty("GROUPS"));  // '' read as not given
  sub->add_option("--freeze", flags->freeze, "Freeze a parameter group: bottom or top")->check(non_empty("GROUP"));
  sub->add_flag("--check", flags->check,
                "Check the configuration, data, model, --init and --out as the run would, print the model, and "
                "exit without training or writing anything");
  add_runtime_flags(*sub, flags->rt);
  sub->callback([flags, &action] { action = [flags] { return run_train(*flags); }; });
}

}  // namespace mrmf::cli
