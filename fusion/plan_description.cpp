// The experiment's plan as text (`mrmf experiment --check`): a researcher
// about to queue hours of training reads what each stage will be -- its
// resolution, batch, learning rate and stop rule after every override --
// before any of it runs.
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

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string Orchestrator::describe_plan() const {
  const uint64_t seed = cfg_.seeds.empty() ? 1 : cfg_.seeds.front();
  const int world = world_.size();
  std::vector<std::string> seeds;
  for (uint64_t s : cfg_.seeds) seeds.push_back(std::to_string(s));
  std::string out = fmt::format(
      "plan: methods {} x seeds {} on {} rank(s); batch is per rank (global = batch x ranks)\n"
      "  {:<30} {:<18} {:>6} {:>10}  stops when\n",
      join(cfg_.methods), join(seeds), world, "stage", "sample", "batch", "lr");
  const auto line = [&](const std::string& name, const Resolution& r, const StopRule& rule, double target,
                        bool finetune) {
    const RunConfig rc = stage_config(r, seed, rule, target, finetune);
    out += fmt::format("  {:<30} {:<18} {:>6} {:>10}  {}\n", name, reduced_sample_shape(rc).str(), rc.train.batch_size,
                       fmt::format("{}", rc.optimizer.lr), stop_text(rule, target));
  };
  const auto step = [&](const std::string& name, const std::string& what) {
    out += fmt::format("  {:<30} {}\n", name, what);
  };
  const StopRule final_rule{0, 0, cfg_.max_epochs};
  for (const auto& method : cfg_.methods) {
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
    if (method == "concurrent")
      step("concurrent", world >= 2 ? std::string("each stage's coarse and dense models train at once on two rank "
                                                  "groups sized by their epoch times (") +
                                          (cfg_.concurrent_times.size() == 2 ? "given" : "probed") + ")"
                                    : std::string("one rank: its stages run one after the other"));
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
