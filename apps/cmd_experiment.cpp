// `mrmf experiment`: baseline, MRT, MRMF with one and more fusions (and
// concurrent training with >= 2 ranks) to the same target validation loss,
// over several seeds; writes report.md, chart.svg and summary.json.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "fusion/orchestrator.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/log.h"
#include "fusion/report.h"

namespace mrmf::cli {
namespace {
struct ExperimentFlags {
  std::string config, out;
  std::vector<std::string> sets;
  std::vector<std::string> methods;
  bool force = false;
  RuntimeFlags rt;
};

int run_experiment(const ExperimentFlags& f) {
  std::vector<std::string> sets = f.sets;
  if (!f.methods.empty()) {  // validated like the config's own list
    std::string list;
    for (const auto& m : f.methods) list += (list.empty() ? "" : ", ") + m;
    sets.push_back("experiment.methods=[" + list + "]");
  }
  ExperimentConfig cfg = load_experiment_config(f.config, sets);  // every config error before any training
  Communicator world = Communicator::world();
  refuse_existing_results(f.out, {"report.md", "summary.json"}, f.force,
                          "--force runs the experiment again and replaces its report (folders of methods this run "
                          "does not run stay as they are), or choose another --out",
                          world);
  apply_runtime_flags(f.rt);
  RuntimeOptions ro;
  ro.device = f.rt.device;
  const Device device = select_device(ro);
  Orchestrator orch(cfg, world, device, f.out);

  ReportContext ctx;
  if (world.is_root()) {
    std::ifstream in(f.config);
    std::stringstream text;
    text << in.rdbuf();
    ctx.title = "MRMF experiment: " + std::filesystem::path(f.config).filename().string();
    ctx.config_text = text.str();
    // What the command line changed: the block above is the file as written.
    if (!sets.empty()) {
      ctx.config_text += "\n# overridden on the command line (--set / --methods):\n";
      for (const auto& a : sets) ctx.config_text += "#   " + a + "\n";
    }
    ctx.ranks = world.size();
    ctx.device = device.str();
    ctx.target_val_loss = cfg.target_val_loss;
  }
  std::vector<MethodRun> runs;
  const size_t total = cfg.methods.size() * cfg.seeds.size();
  size_t k = 0;
  for (uint64_t seed : cfg.seeds) {
    for (const auto& m : cfg.methods) {
      log::info("=== [{}/{}] method {} seed {} ===", ++k, total, m, seed);
      runs.push_back(orch.run(m, seed));
      const auto& r = runs.back();
      log::info("=== {} seed {}: {:.1f} s, final val loss {:.5f}{}, epochs {} before / {} after fusion", m, seed,
                r.total_s, r.final_val_loss, r.reached_target ? "" : " (target NOT reached)", r.epochs_before_fusion,
                r.epochs_after_fusion);
      // The report is rewritten after every run, so that an experiment of
      // hours that is stopped (or fails) keeps the results it already has.
      if (world.is_root()) write_report(f.out, runs, ctx);
    }
  }
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
  sub->add_option("--out,-o", flags->out, "Output folder: report.md, chart.svg, summary.json, per-run metrics")->required();
  sub->add_option("--set", flags->sets,
                  "Override a key: experiment.seeds=[1,2] for the experiment, any run key (train.batch_size=64) for every run");
  sub->add_flag("--force", flags->force, "Replace the experiment already in --out (without it, such a folder is refused)");
  sub->add_option("--methods", flags->methods, "Run only these methods (baseline, mrt, mrmf1, mrmf2, concurrent)");
  add_runtime_flags(*sub, flags->rt);
  sub->callback([flags, &action] { action = [flags] { return run_experiment(*flags); }; });
}

}  // namespace mrmf::cli
