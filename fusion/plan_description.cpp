// The experiment's plan as text (`mrmf experiment --check`): a researcher
// about to queue hours of training reads what each stage will be -- its
// resolution, batch, learning rate and stop rule after every override --
// before any of it runs. Stage names are those the log, the run folders and
// the report use.
#include <fmt/format.h>

#include <algorithm>

#include "fusion/orchestrator.h"
#include "fusion/trainer.h"

namespace mrmf {

namespace {

std::string stop_text(const StopRule& r, double target) {
  std::string s;
  if (target > 0) s = fmt::format("val loss <= {}, ", target);
  if (r.threshold > 0 && r.patience > 0) {
    s += fmt::format("train loss down < {} for {} epoch(s)", r.threshold, r.patience);
    if (r.reference == "best") s += " (from the best)";
    if (r.min_epochs > 0) s += fmt::format(", not before epoch {}", r.min_epochs);
    s += ", ";
  }
  return s + fmt::format("at most {} epoch(s)", r.max_epochs);
}

}  // namespace

std::string Orchestrator::describe_plan(const std::vector<std::pair<std::string, uint64_t>>& runs,
                                        const std::vector<std::pair<std::string, uint64_t>>& finished) const {
  const uint64_t seed = cfg_.seeds.empty() ? 1 : cfg_.seeds.front();
  const int world = world_.size();
  std::string list;
  std::vector<std::string> methods;  // in the order the plan first runs them
  for (const auto& run : runs) {
    const bool done = std::find(finished.begin(), finished.end(), run) != finished.end();
    list +=
        fmt::format("{}{} seed {}{}", list.empty() ? "" : ", ", run.first, run.second, done ? " (finished: kept)" : "");
    if (std::find(methods.begin(), methods.end(), run.first) == methods.end()) methods.push_back(run.first);
  }
  std::string out = fmt::format(
      "plan on {} rank(s): {}\nbatch is per rank (global = batch x ranks)\n  {:<30} {:<18} {:>6} {:>10}  stops when\n",
      world, list, "stage", "sample", "batch", "lr");
  const auto line = [&](const std::string& name, const Resolution& r, const StopRule& rule, double target,
                        bool finetune, const std::string& note = "") {
    const RunConfig rc = stage_config(r, seed, rule, target, finetune);
    out += fmt::format("  {:<30} {:<18} {:>6} {:>10}  {}{}\n", name, reduced_sample_shape(rc).str(),
                       rc.train.batch_size, fmt::format("{}", rc.optimizer.lr), stop_text(rule, target), note);
  };
  const auto step = [&](const std::string& name, const std::string& what) {
    out += fmt::format("  {:<30} {}\n", name, what);
  };
  const StopRule final_rule{0, 0, cfg_.max_epochs};
  for (const auto& method : methods) {
    const auto ladder = cfg_.ladder_for(method);
    const std::string last = resolution_key(ladder.back());
    if (method == "baseline") {
      line("baseline/baseline@" + last, ladder.back(), final_rule, cfg_.target_val_loss, false);
      continue;
    }
    if (method == "mrt") {
      const std::string coarse = "coarse@" + resolution_key(ladder[0]);
      line("mrt/" + coarse, ladder[0], cfg_.stops_for_stage(0).coarse, 0, false);
      step("mrt/transfer", "bottom (with BN statistics) from " + coarse + ", top " +
                               (cfg_.mrt_top == "resample" ? "from " + coarse + ", resampled" : "fresh"));
      line("mrt/finetune@" + last, ladder.back(), final_rule, cfg_.target_val_loss, true);
      continue;
    }
    if (method == "concurrent" && world >= 2) {  // run_concurrent: one fusion, two rank groups at once
      const StageStops stops = cfg_.stops_for_stage(0);
      const std::string coarse = "coarse@" + resolution_key(ladder[0]), dense = "dense@" + last;
      if (cfg_.concurrent_times.size() == 2)
        step("concurrent", fmt::format("rank groups sized by the given epoch times (dense {} s, coarse {} s)",
                                       cfg_.concurrent_times[0], cfg_.concurrent_times[1]));
      else
        step("concurrent/split probe", fmt::format("{} step(s) of each model on all ranks time their epochs, which "
                                                   "size the two rank groups",
                                                   cfg_.probe_steps));
      const std::string overtime =
          cfg_.concurrent_overtime ? "; done first, its group trains on until the other is (concurrent_overtime)" : "";
      line("concurrent/" + coarse, ladder[0], stops.coarse, 0, false, overtime);
      line("concurrent/" + dense, ladder.back(), stops.dense, 0, false,
           "; at the same time, on the other group" + overtime);
      step("concurrent/exchange", "bottom from " + coarse + ", top from " + dense +
                                      " (every rank gets both); optimizer state fresh (each group's stays on its "
                                      "ranks)");
      line("concurrent/finetune@" + last, ladder.back(), final_rule, cfg_.target_val_loss, true);
      continue;
    }
    if (method == "concurrent") step("concurrent", "one rank: run as mrmf1, its stages one after the other");
    for (size_t st = 0; st + 1 < ladder.size(); ++st) {
      const StageStops stops = cfg_.stops_for_stage(st);
      const std::string prefix = method + "/stage" + std::to_string(st + 1) + "/";
      const std::string coarse = "coarse@" + resolution_key(ladder[st]),
                        dense = "dense@" + resolution_key(ladder[st + 1]);
      line(prefix + coarse, ladder[st], stops.coarse, 0, false);
      if (st > 0) step("", "(starts from the fused model of stage " + std::to_string(st) + ")");
      line(prefix + dense, ladder[st + 1], stops.dense, 0, false);
      step(prefix + "fusion",
           "bottom from " + coarse + ", top from " + dense + "; optimizer state " + cfg_.optimizer_at_fusion);
    }
    line(method + "/finetune@" + last, ladder.back(), final_rule, cfg_.target_val_loss, true);
  }
  return out;
}

}  // namespace mrmf
