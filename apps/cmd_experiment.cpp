// `mrmf experiment`: baseline, MRT, MRMF with one and more fusions (and
// concurrent training with >= 2 ranks) to the same target validation loss,
// over several seeds; writes report.md, chart.svg and summary.json.
#include <omp.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/run_lock.h"
#include "fusion/experiment_state.h"
#include "fusion/orchestrator.h"
#include "fusion/report.h"

namespace mrmf::cli {
namespace {
struct ExperimentFlags {
  std::string config, out;
  std::vector<std::string> sets;
  std::vector<std::string> methods;
  bool force = false, resume = false, check = false;
  RuntimeFlags rt;
};

namespace fs = std::filesystem;

// An earlier experiment's report in <out>, and with --force its state too,
// moved into <out>/replaced_<UTC time>/ (rank 0): what --force replaces is
// kept until the user deletes it, also when the new experiment fails.
void move_aside_earlier_report(const std::string& out, bool with_state) {
  std::vector<std::string> found;
  for (const char* name : {"report.md", "summary.json", "chart.svg", kExperimentStateFile})
    if (fs::exists(fs::path(out) / name) && (with_state || name != std::string(kExperimentStateFile)))
      found.emplace_back(name);
  if (found.empty()) return;
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  const std::string base = fs::path(out) / (std::string("replaced_") + stamp);
  fs::path dest = base;
  for (int k = 2; fs::exists(dest); ++k) dest = base + "_" + std::to_string(k);
  fs::create_directories(dest);
  for (const auto& name : found) fs::rename(fs::path(out) / name, dest / name);
  std::string list;
  for (const auto& name : found) list += (list.empty() ? "" : ", ") + name;
  log::info("the replaced experiment's {} moved to {}", list, dest.string());
}

// What --resume continues: rank 0 reads and checks <out>'s state, and every
// rank gets the same answer (the state, or the same error), so that no rank
// goes on alone. Nothing to resume: an empty state with this identity.
ExperimentState resumable_state(const std::string& out, const std::string& identity,
                                const std::vector<std::string>& run_folders, const Communicator& world) {
  std::string answer;
  if (world.is_root()) {
    nlohmann::json a;
    try {
      const fs::path state_path = fs::path(out) / kExperimentStateFile;
      ExperimentState st;
      st.identity = identity;
      std::error_code ec;
      if (fs::exists(state_path, ec)) {
        st = load_experiment_state(state_path.string());
        const auto diffs = identity_differences(st.identity, identity);
        if (!diffs.empty()) {
          std::string list;
          for (const auto& d : diffs) list += "\n  " + d;
          MRMF_THROW(Config, "--resume: ", out, " holds an experiment with another configuration, data or launch "
                     "(seeds and methods may be added; nothing else may change); saved -> now:", list,
                     "\n--force starts it over, or choose another --out");
        }
      } else if (fs::exists(fs::path(out) / "report.md", ec) || fs::exists(fs::path(out) / "summary.json", ec)) {
        MRMF_THROW(Config, "--resume: ", out, " has a report but no ", kExperimentStateFile,
                   " (the record of finished runs --resume needs); --force starts the experiment over");
      } else {
        // Run folders without the record that says what they hold: a new
        // experiment empties them, and --resume used to, without a word.
        std::string held;
        for (const auto& r : run_folders)
          if (fs::exists(fs::path(out) / r, ec)) held += (held.empty() ? "" : ", ") + r;
        MRMF_CHECK_KIND(Config, held.empty(), "--resume: ", out, " holds run folders of this plan (", held, ") but no ",
                        kExperimentStateFile,
                        ", the record of what they hold, so nothing in them can "
                        "be resumed; --force starts the experiment over (emptying them), or choose another --out");
        log::info("--resume: nothing to resume in {}; starting the experiment", out);
      }
      a = state_to_json(st);
    } catch (const Error& e) {
      a = {{"error", e.message()}};
    }
    answer = a.dump();
  }
  const nlohmann::json a = nlohmann::json::parse(world.broadcast_string(answer, 0));
  if (a.contains("error")) MRMF_THROW(Config, a["error"].get<std::string>());
  return state_from_json(a);
}

int run_experiment(const ExperimentFlags& f) {
  std::vector<std::string> sets = f.sets;
  if (!f.methods.empty()) {  // validated like the config's own list
    std::string list;
    for (const auto& m : f.methods) list += (list.empty() ? "" : ", ") + m;
    sets.push_back("experiment.methods=[" + list + "]");
  }
  ExperimentConfig cfg = load_experiment_config(f.config, sets);  // every config error before any training
  Communicator world = Communicator::world();
  // Ranks must agree on what to do before anything is collective: only the
  // --resume ranks read the saved state (a broadcast the others never
  // joined: a hang, or a truncated message), stage_checkpoints decides
  // whether a run folder is emptied (with a barrier), and ranks writing to
  // different folders split one run's files between them.
  {
    std::error_code ec;
    fs::path out = fs::absolute(f.out, ec).lexically_normal();
    if (!out.has_filename()) out = out.parent_path();  // "x/" is "x"
    const std::string how = std::string(f.resume  ? "--resume"
                                        : f.force ? "--force"
                                                  : "neither --resume nor --force") +
                            ", --out " + out.string() + ", experiment.stage_checkpoints " +
                            (cfg.stage_checkpoints ? "true" : "false");
    agree_on_all_ranks(how, "the command's mode and folder", world);
  }
  // The plan's run folders too: a new experiment empties them (an earlier
  // experiment's, whose report was deleted or never written, would be lost
  // without a word).
  std::vector<std::string> run_folders;
  for (uint64_t seed : cfg.seeds)
    for (const auto& m : cfg.methods) run_folders.push_back(m + "/seed" + std::to_string(seed));
  std::vector<std::string> results{"report.md", "summary.json", kExperimentStateFile};
  results.insert(results.end(), run_folders.begin(), run_folders.end());
  refuse_existing_results(f.out, results, f.force || f.resume,
                          "--resume runs what it has not finished yet, --force runs the experiment again and replaces "
                          "its report (folders of methods this run does not run stay as they are), or choose another "
                          "--out",
                          world);
  // One command a folder (core/run_lock.h); --check writes nothing, so it
  // neither takes the lock nor tidies the folder.
  std::optional<RunFolderLock> lock;
  if (!f.check) {
    lock.emplace(f.out, world);
    lock->remove_partial_files();
  }
  // runtime.threads of the run configuration, unless --threads says otherwise
  // (as `mrmf train` does).
  // runtime.device likewise: a GPU experiment on a node whose GPU is gone
  // must fail as `mrmf train` does, not run on the CPU.
  RuntimeFlags rt = f.rt;
  const RunConfig run_cfg = parse_run_config(cfg.run_yaml, cfg.run_sets, "experiment run configuration");
  if (rt.threads == 0) rt.threads = static_cast<int>(run_cfg.runtime.threads);
  if (rt.device.empty()) rt.device = run_cfg.runtime.device;
  apply_runtime_flags(rt);
  RuntimeOptions ro;
  ro.device = rt.device;
  const Device device = select_device(ro);
  // Rank 0's thread count: it is what the record keeps, and ranks on nodes
  // of other sizes are not a different experiment.
  const int threads = std::stoi(world.broadcast_string(std::to_string(omp_get_max_threads()), 0));
  const std::string identity =
      experiment_identity(cfg, LaunchInfo{world.size(), device.is_cuda() ? "cuda" : "cpu", threads});
  ExperimentState state;
  state.identity = identity;
  if (f.resume) state = resumable_state(f.out, identity, run_folders, world);
  // Only runs that had started continue from their stage checkpoints; a run
  // that had not, or that this command adds, starts clean (its folder may
  // hold another experiment's leftovers).
  const auto interrupted_runs = state.started;
  // The plan: what a resumed experiment had planned, then what this command adds.
  for (uint64_t seed : cfg.seeds)
    for (const auto& m : cfg.methods)
      if (std::find(state.plan.begin(), state.plan.end(), std::make_pair(m, seed)) == state.plan.end())
        state.plan.emplace_back(m, seed);
  for (const auto& [m, seed] : state.plan)  // a hand-edited state: a method this ladder does not have
    check_method_fits_ladder(cfg, m, "--resume: the plan saved in " + f.out);
  // Ranks started with different flags or files would run different plans
  // and wait for each other in different collectives forever.
  {
    std::string text = identity;
    for (const auto& [m, seed] : state.plan) text += "\n" + m + " " + std::to_string(seed);
    world.check_same_on_all_ranks(fnv1a64(text), "the experiment (its configuration, data, methods and seeds)");
  }
  // A resumed plan may hold methods and seeds this command does not name (an
  // earlier command's): they run too, so they are checked before training.
  for (const auto& [m, seed] : state.plan) {
    if (std::find(cfg.methods.begin(), cfg.methods.end(), m) == cfg.methods.end()) cfg.methods.push_back(m);
    if (std::find(cfg.seeds.begin(), cfg.seeds.end(), seed) == cfg.seeds.end()) cfg.seeds.push_back(seed);
  }
  Orchestrator orch(cfg, world, device, f.out);  // checks every planned stage (fusion/preflight.cpp)
  if (f.check) {
    if (world.is_root()) {
      std::vector<std::pair<std::string, uint64_t>> finished;
      for (const auto& r : state.runs) finished.emplace_back(r.method, r.seed);
      std::printf(
          "%s\nchecked: the configuration, data, models, transfers and fusions of every stage (%zu run(s) "
          "planned); nothing was trained or written\n",
          orch.describe_plan(state.plan, finished).c_str(), state.plan.size());
    }
    return 0;
  }

  ReportContext ctx;
  if (world.is_root()) {
    const std::string text = read_config_file(f.config, "experiment config");
    ctx.title = "MRMF experiment: " + std::filesystem::path(f.config).filename().string();
    std::string overrides;  // what the command line changed: the block above is the file as written
    for (const auto& a : sets) overrides += "#   " + a + "\n";
    if (state.config_text.empty()) {
      state.config_text = text;
      if (!overrides.empty()) state.config_text += "\n# overridden on the command line (--set / --methods):\n" + overrides;
      ctx.config_text = state.config_text;
    } else {  // resumed: the first command's configuration, and how it was resumed
      ctx.config_text = state.config_text + "\n# resumed (--resume)" +
                        (overrides.empty() ? std::string("\n") : " with:\n" + overrides);
    }
    ctx.ranks = world.size();
    ctx.device = device.str();
    ctx.target_val_loss = cfg.target_val_loss;
    ctx.planned_runs = state.plan.size();
    // A new experiment records its (empty) state at once and moves an
    // earlier report (--force) aside, so that one stopped during its first
    // run can be resumed, no report describes another experiment meanwhile,
    // and the replaced results are still there if the new run fails.
    if (state.runs.empty()) move_aside_earlier_report(f.out, f.force);
    save_experiment_state(f.out, state);
  }
  std::vector<MethodRun> runs = state.runs;
  const size_t total = state.plan.size();
  size_t k = 0;
  for (const auto& [m, seed] : state.plan) {
    if (const MethodRun* done = state.find(m, seed)) {
      log::info("=== [{}/{}] method {} seed {}: finished earlier ({:.1f} s, final val loss {:.5f}), kept", ++k, total, m,
                seed, done->total_s, done->final_val_loss);
      continue;
    }
    log::info("=== [{}/{}] method {} seed {} ===", ++k, total, m, seed);
    const bool resume_stages = std::find(interrupted_runs.begin(), interrupted_runs.end(), std::make_pair(m, seed)) !=
                               interrupted_runs.end();
    if (!resume_stages) {
      // Emptied first, then recorded as started: a process stopped in
      // between leaves a run that starts clean again.
      orch.clear_run(m, seed);
      state.started.emplace_back(m, seed);
      if (world.is_root()) save_experiment_state(f.out, state);
    }
    runs.push_back(orch.run(m, seed, resume_stages));  // an interrupted run continues in its stages
    const auto& r = runs.back();
    log::info("=== {} seed {}: {:.1f} s, final val loss {:.5f}{}, epochs {} before / {} after fusion", m, seed,
              r.total_s, r.final_val_loss, r.reached_target ? "" : " (target NOT reached)", r.epochs_before_fusion,
              r.epochs_after_fusion);
    // The state and the report are rewritten after every run, so that an
    // experiment of hours that is stopped (or fails) keeps the results it
    // already has, and --resume continues from them.
    state.runs.push_back(r);
    if (world.is_root()) {
      save_experiment_state(f.out, state);
      write_report(f.out, runs, ctx);
    }
    orch.drop_stage_checkpoints(m, seed);  // after the state holds the run
  }
  // Every run finished earlier: the report is rewritten all the same (with
  // this command's context).
  if (world.is_root()) write_report(f.out, runs, ctx);
  if (world.is_root())
    std::printf("\n%s\nwrote %s/{report.md,chart.svg,summary.json}\n", summary_table(runs).c_str(), f.out.c_str());
  return 0;
}
}  // namespace

void add_experiment_command(CLI::App& app, Action& action) {
  auto flags = std::make_shared<ExperimentFlags>();
  auto* sub = app.add_subcommand("experiment", "Compare baseline, MRT and MRMF to the same target (the paper's tables)");
  sub->add_option("--config,-c", flags->config, "Experiment YAML (see configs/experiments/*.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out,-o", flags->out, "Output folder: report.md, chart.svg, summary.json, per-run metrics")
      ->required()
      ->check(non_empty());
  sub->add_option("--set", flags->sets,
                  "Override a key: experiment.seeds=[1,2] for the experiment, any run key (train.batch_size=64) for every run");
  auto* force =
      sub->add_flag("--force", flags->force,
                    "Replace the experiment already in --out, its report and state moved into --out/replaced_<time>/ "
                    "(without it, such a folder is refused)");
  sub->add_flag("--resume", flags->resume,
                "Continue the experiment in --out: runs (method x seed) it finished are kept, the others run; "
                "the configuration, data and launch (ranks, device kind, threads) must be the same; seeds and "
                "methods may be added")
      ->excludes(force);
  sub->add_flag("--check", flags->check,
                "Check everything the experiment would check before training (configuration, data, every stage's "
                "model, transfers and fusions, --out, --resume's record), print the plan stage by stage, and exit "
                "without training or writing anything");
  sub->add_option("--methods", flags->methods, "Run only these methods (baseline, mrt, mrmf1, mrmf2, concurrent)");
  add_runtime_flags(*sub, flags->rt);
  sub->callback([flags, &action] { action = [flags] { return run_experiment(*flags); }; });
}

}  // namespace mrmf::cli
