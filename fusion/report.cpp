#include "fusion/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/version.h"
#include "data/h5file.h"
#include "fusion/experiment_state.h"

namespace mrmf {
namespace fs = std::filesystem;

namespace {
// Which builds finished the runs: "mrmf X" when one did them all, else each
// with its count ("runs by mrmf A (2), mrmf B (1)"), a run from an older
// state as "an earlier build".
std::string builds_text(const std::vector<MethodRun>& runs) {
  std::vector<std::pair<std::string, int>> builds;
  for (const auto& r : runs) {
    const std::string b = r.mrmf.empty() ? "an earlier build" : "mrmf " + r.mrmf;
    auto it = std::find_if(builds.begin(), builds.end(), [&](const auto& e) { return e.first == b; });
    if (it == builds.end())
      builds.emplace_back(b, 1);
    else
      ++it->second;
  }
  if (builds.empty()) return "mrmf " + build_version();
  if (builds.size() == 1) return builds[0].first;
  std::string s = "runs by ";
  for (size_t i = 0; i < builds.size(); ++i)
    s += fmt::format("{}{} ({})", i ? ", " : "", builds[i].first, builds[i].second);
  return s;
}

struct Stat {
  double mean = 0, sd = 0;
  int n = 0;
};
Stat stat(const std::vector<double>& v) {
  Stat s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= v.size();
  if (v.size() > 1) {
    for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(s.sd / (v.size() - 1));
  }
  return s;
}
std::string pm(const Stat& s, int prec) {
  if (s.n == 0) return "-";
  return s.n > 1 ? fmt::format("{:.{}f} ± {:.{}f}", s.mean, prec, s.sd, prec) : fmt::format("{:.{}f}", s.mean, prec);
}

std::vector<std::string> method_order(const std::vector<MethodRun>& runs) {
  std::vector<std::string> order;
  for (const auto& r : runs)
    if (std::find(order.begin(), order.end(), r.method) == order.end()) order.push_back(r.method);
  return order;
}

std::vector<const MethodRun*> of(const std::vector<MethodRun>& runs, const std::string& m) {
  std::vector<const MethodRun*> out;
  for (const auto& r : runs)
    if (r.method == m) out.push_back(&r);
  return out;
}

template <class F>
Stat over(const std::vector<const MethodRun*>& rs, F f) {
  std::vector<double> v;
  for (const auto* r : rs) v.push_back(f(*r));
  return stat(v);
}

std::string display(const std::string& m) {
  if (m == "baseline") return "Baseline";
  if (m == "mrt") return "MRT";
  if (m == "concurrent") return "MRMF (concurrent)";
  if (m == "mrmf1") return "MRMF (one fusion)";
  if (m.rfind("mrmf", 0) == 0) return "MRMF (" + m.substr(4) + " fusions)";
  return m;
}

// The method's name as the report shows it, from its runs: a concurrent
// method that fell back to sequential stages (one rank) says so.
std::string label(const std::vector<MethodRun>& runs, const std::string& m) {
  if (m != "concurrent") return display(m);
  const bool groups = std::any_of(runs.begin(), runs.end(),
                                  [](const MethodRun& r) { return r.method == "concurrent" && r.concurrent_groups; });
  return groups ? display(m) : "MRMF (concurrent, run sequentially)";
}

// Seconds with the decimals their size needs (a short run's 0.04 s must not read 0.0).
int time_decimals(double mean) { return mean >= 10 ? 1 : mean >= 1 ? 2 : 3; }
std::string pm_time(const Stat& s) { return pm(s, time_decimals(s.mean)); }

// Relative time saving of `rs` against `ref` (positive: faster), over the
// seeds both have; none unless every such run of both reached the target
// (runs stopped by their guard compare budgets) and they share a seed.
std::optional<double> improvement_pct(const std::vector<const MethodRun*>& rs,
                                      const std::vector<const MethodRun*>& ref) {
  std::vector<const MethodRun*> a, b;
  for (const auto* r : rs)
    for (const auto* q : ref)
      if (q->seed == r->seed) {
        a.push_back(r);
        b.push_back(q);
      }
  const auto reached = [](const std::vector<const MethodRun*>& v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](const MethodRun* r) { return r->reached_target; });
  };
  if (!reached(a) || !reached(b)) return std::nullopt;
  const double t = over(a, [](const MethodRun& r) { return r.total_s; }).mean;
  const double t_ref = over(b, [](const MethodRun& r) { return r.total_s; }).mean;
  if (!(t_ref > 0)) return std::nullopt;
  return 100.0 * (t_ref - t) / t_ref;
}

// Final validation loss; runs that diverged (NaN) are counted apart.
std::string val_cell(const std::vector<const MethodRun*>& rs) {
  std::vector<double> ok;
  for (const auto* r : rs)
    if (std::isfinite(r->final_val_loss)) ok.push_back(r->final_val_loss);
  if (ok.empty()) return rs.empty() ? "-" : "diverged";
  const std::string v = pm(stat(ok), 4);
  return ok.size() == rs.size() ? v : fmt::format("{} ({} of {} diverged)", v, rs.size() - ok.size(), rs.size());
}

// Stage label without the method prefix: "stage1/coarse@4" -> "stage 1 coarse (4)".
std::string stage_label(const StageResult& s) {
  std::string n = s.name.substr(s.name.find('/') + 1);
  return n;
}

// Segment of the stacked bar a stage belongs to, as in the paper's figures:
// first training stage, second training stage, ..., fine-tuning.
std::string segment_of(const StageResult& s) {
  if (s.role == "finetune" || s.role == "baseline") return "fine-tuning / original";
  const auto slash = s.name.find("/stage");
  if (slash != std::string::npos) return "stage " + s.name.substr(slash + 6, s.name.find('/', slash + 1) - slash - 6);
  return "stage 1";
}
// One row of the "time per stage" table: stage i of a method, over seeds.
struct StageRow {
  std::string method, stage, resolution, stops;
  int ranks = 0;
  Stat epochs, time, val;
};

std::vector<StageRow> stage_rows(const std::vector<MethodRun>& runs, const std::string& m) {
  std::vector<StageRow> rows;
  const auto rs = of(runs, m);
  // Stages line up across seeds (same method, same ladder); a run that
  // diverged has only its stages up to that one, so the rows follow the
  // run with the most.
  const MethodRun* longest = rs[0];
  for (const auto* r : rs)
    if (r->stages.size() > longest->stages.size()) longest = r;
  for (size_t i = 0; i < longest->stages.size(); ++i) {
    std::vector<double> ep, tt, vl;
    std::set<std::string> stops;
    for (const auto* r : rs) {
      if (i >= r->stages.size()) continue;
      ep.push_back(double(r->stages[i].epochs));
      tt.push_back(r->stages[i].time_s);
      if (std::isfinite(r->stages[i].final_val_loss)) vl.push_back(r->stages[i].final_val_loss);  // not "diverged"
      stops.insert(r->stages[i].stop_reason);
    }
    StageRow row;
    const auto& s0 = longest->stages[i];
    row.method = m;
    row.stage = stage_label(s0);
    row.resolution = s0.resolution;
    row.ranks = s0.ranks;
    for (const auto& x : stops) row.stops += (row.stops.empty() ? "" : ", ") + x;
    row.epochs = stat(ep);
    row.time = stat(tt);
    row.val = stat(vl);
    rows.push_back(row);
  }
  return rows;
}

// The per-epoch breakdown of one resolution on one rank count (the paper's
// Tables 4 and 8: per GPU count and data set): means over those epochs of
// all runs. A concurrent run's pre-fusion stages train on fewer ranks than
// its fine-tuning, so they form rows of their own. Partial epochs (continued
// from a mid-epoch checkpoint, or extra epochs cut short) are left out:
// their times cover a part of an epoch.
struct ResolutionRow {
  std::string resolution;
  int ranks = 1;
  size_t epochs = 0;
  double io = 0, compute = 0, comm = 0, comm_in_flight = 0, val = 0, epoch = 0, samples_per_s = 0;
};

std::vector<ResolutionRow> resolution_rows(const std::vector<MethodRun>& runs) {
  std::map<std::pair<std::string, int>, std::vector<const EpochRecord*>> groups;
  for (const auto& r : runs)
    for (const auto& s : r.stages)
      for (const auto& e : s.history)
        if (!e.partial()) groups[{s.resolution, s.ranks}].push_back(&e);
  std::vector<ResolutionRow> rows;
  for (const auto& [key, es] : groups) {
    auto mean = [&](auto f) {
      double v = 0;
      for (const auto* e : es) v += f(*e);
      return v / es.size();
    };
    ResolutionRow row;
    row.resolution = key.first;
    row.ranks = key.second;
    row.epochs = es.size();
    row.io = mean([](const EpochRecord& e) { return e.io_s; });
    row.compute = mean([](const EpochRecord& e) { return e.compute_s; });
    row.comm = mean([](const EpochRecord& e) { return e.comm_s; });
    row.comm_in_flight = mean([](const EpochRecord& e) { return e.comm_in_flight_s; });
    row.val = mean([](const EpochRecord& e) { return e.val_s; });
    row.epoch = mean([](const EpochRecord& e) { return e.epoch_s; });
    // A rate over all the epochs' samples and time (a mean of rates would
    // weigh a short epoch like a long one).
    double samples = 0, secs = 0;
    for (const auto* e : es) {
      samples += static_cast<double>(e->samples);
      secs += e->epoch_s - e->val_s;
    }
    row.samples_per_s = samples / std::max(secs, 1e-9);
    rows.push_back(row);
  }
  return rows;
}

// summary.json's key of a row: the resolution, qualified by the rank count
// when it is not the experiment's (concurrent groups), e.g. "2 (1 rank)".
std::string resolution_row_key(const ResolutionRow& row, int launch_ranks) {
  if (row.ranks == launch_ranks) return row.resolution;
  return fmt::format("{} ({} rank{})", row.resolution, row.ranks, row.ranks == 1 ? "" : "s");
}

// Of no values (a stage every run of which diverged): null, not 0.
nlohmann::json to_json(const Stat& s) {
  if (s.n == 0) return {{"mean", nullptr}, {"sd", nullptr}, {"n", 0}};
  return {{"mean", s.mean}, {"sd", s.sd}, {"n", s.n}};
}
}  // namespace

std::string summary_table(const std::vector<MethodRun>& runs) {
  const auto order = method_order(runs);
  const auto base = of(runs, "baseline"), mrt = of(runs, "mrt");
  std::string out = "| | " ;
  for (const auto& m : order) out += label(runs, m) + " | ";
  out += "\n|---|";
  for (size_t i = 0; i < order.size(); ++i) out += "---|";
  out += "\n";
  auto row = [&](const std::string& name, auto cell) {
    out += "| " + name + " | ";
    for (const auto& m : order) out += cell(of(runs, m)) + " | ";
    out += "\n";
  };
  row("Validation loss (MSE)", [](auto rs) { return val_cell(rs); });
  row("Epochs before fusion", [](auto rs) {
    return rs[0]->method == "baseline" ? std::string("-")
                                       : pm(over(rs, [](const MethodRun& r) { return double(r.epochs_before_fusion); }), 1);
  });
  row("Epochs after fusion", [](auto rs) { return pm(over(rs, [](const MethodRun& r) { return double(r.epochs_after_fusion); }), 1); });
  row("Total time (s)", [](auto rs) { return pm_time(over(rs, [](const MethodRun& r) { return r.total_s; })); });
  // A time saving is a saving to the target only when every run of both
  // methods got there: runs stopped by their epoch guard compare budgets.
  const auto improvement = [&](const std::vector<const MethodRun*>& rs, const std::vector<const MethodRun*>& ref) {
    const auto pct = improvement_pct(rs, ref);
    return pct ? fmt::format("{:+.1f} %", *pct) : std::string("n/a (target not reached)");
  };
  row("Improvement over baseline", [&](auto rs) {
    if (base.empty() || rs[0]->method == "baseline") return std::string("-");
    return improvement(rs, base);
  });
  row("Improvement over MRT", [&](auto rs) {
    if (mrt.empty() || rs[0]->method == "baseline" || rs[0]->method == "mrt") return std::string("-");
    return improvement(rs, mrt);
  });
  row("Reached target", [](auto rs) {
    int k = 0;
    for (const auto* r : rs) k += r->reached_target;
    return fmt::format("{}/{}", k, rs.size());
  });
  return out;
}

static std::string chart_svg(const std::vector<MethodRun>& runs) {
  const auto order = method_order(runs);
  // Mean time per segment per method.
  std::vector<std::string> segments;
  std::map<std::string, std::map<std::string, double>> t;  // method -> segment -> mean seconds
  for (const auto& m : order) {
    const auto rs = of(runs, m);
    for (const auto* r : rs) {
      std::map<std::string, double> seg;
      for (const auto& s : r->stages) seg[segment_of(s)] += s.time_s;
      if (r->concurrent_groups) {  // the two groups ran at the same time: the slower one counts
        double pre = 0;
        for (const auto& s : r->stages)
          if (s.role != "finetune") pre = std::max(pre, s.time_s);
        seg["stage 1"] = pre;
      }
      seg["fusion"] += r->fusion_s;
      if (r->split_probe_s > 0) seg["split probe"] += r->split_probe_s;
      for (auto& [k, v] : seg) {
        t[m][k] += v / rs.size();
        if (std::find(segments.begin(), segments.end(), k) == segments.end()) segments.push_back(k);
      }
    }
  }
  std::sort(segments.begin(), segments.end(), [](const std::string& a, const std::string& b) {
    auto rank = [](const std::string& s) {
      return s == "split probe" ? -1 : s.rfind("stage", 0) == 0 ? 0 : s == "fusion" ? 1 : 2;
    };
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  double tmax = 1e-9;
  for (const auto& m : order) {
    double sum = 0;
    for (const auto& [k, v] : t[m]) sum += v;
    tmax = std::max(tmax, sum);
  }
  const char* colors[] = {"#d62728", "#ff7f0e", "#bcbd22", "#9467bd", "#8c564b", "#7f7f7f"};
  auto color = [&](const std::string& seg) -> std::string {
    if (seg == "fine-tuning / original") return "#f2d43d";
    if (seg == "fusion") return "#555555";
    if (seg == "split probe") return "#17becf";  // a colour of its own: the stages keep theirs
    const size_t i = static_cast<size_t>(std::find(segments.begin(), segments.end(), seg) - segments.begin());
    return colors[i % 6];
  };
  const int W = 760, left = 170, right = 30, bar_h = 34, gap = 18, top = 50;
  const int H = top + static_cast<int>(order.size()) * (bar_h + gap) + 80;
  const double scale = (W - left - right) / tmax;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"13\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">End-to-end training time per stage (mean over seeds)</text>\n",
      W, H, left);
  int y = top;
  for (const auto& m : order) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, y + bar_h / 2 + 5,
                       label(runs, m));
    double x = left, total = 0;
    for (const auto& seg : segments) {
      const double v = t[m].count(seg) ? t[m][seg] : 0;
      if (v <= 0) continue;
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: {:.{}f} "
          "s</title></rect>\n",
          x, y, v * scale, bar_h, color(seg), seg, v, time_decimals(v));
      x += v * scale;
      total += v;
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.{}f} s</text>\n", x + 5, y + bar_h / 2 + 5, total,
                       time_decimals(total));
    y += bar_h + gap;
  }
  // Axis and legend.
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, y, W - right, y);
  // Tick labels with as many decimals as a quarter of the axis needs (a
  // short run's 0.79, 1.58 ... s must not all read "1").
  const double quarter = tmax / 4;
  const int decimals = quarter >= 10 ? 0 : quarter >= 1 ? 1 : quarter >= 0.1 ? 2 : 3;
  for (int i = 0; i <= 4; ++i) {
    const double v = tmax * i / 4, x = left + v * scale;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.{}f}</text>\n", x, y + 16, v,
                       decimals);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">seconds</text>\n", (left + W - right) / 2, y + 34);
  int lx = left;
  for (const auto& seg : segments) {
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                       lx, y + 48, color(seg), lx + 16, y + 59, seg);
    lx += 30 + static_cast<int>(seg.size()) * 7;
  }
  svg += "</svg>\n";
  return svg;
}

std::string write_report(const std::string& dir, const std::vector<MethodRun>& runs, const ReportContext& ctx) {
  fs::create_directories(dir);
  const auto order = method_order(runs);
  std::string md = "# " + ctx.title + "\n\n";
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  // Seeds per method: a resumed experiment may have added seeds to some.
  std::string seeds;
  bool same = true;
  for (const auto& m : order) {
    same = same && of(runs, m).size() == of(runs, order[0]).size();
    seeds += fmt::format("{}{} {}", seeds.empty() ? "" : ", ", label(runs, m), of(runs, m).size());
  }
  if (runs.empty())
    seeds = "0";
  else if (same)
    seeds = std::to_string(of(runs, order[0]).size());
  else
    seeds += " (improvements compare the seeds both methods have)";
  md += fmt::format("{} — {} rank(s) on {}; target validation loss {}; seeds: {}; {}.\n\n", date, ctx.ranks, ctx.device,
                    ctx.target_val_loss, seeds, builds_text(runs));
  if (runs.size() < ctx.planned_runs)
    md += fmt::format("**Partial: {} of {} runs finished.** The experiment is still running, or it was stopped; "
                      "`mrmf experiment --resume` with the same configuration and --out runs the rest.\n\n",
                      runs.size(), ctx.planned_runs);
  md += "## End-to-end results (mean ± sd over seeds)\n\n" + summary_table(runs) + "\n";
  md +=
      "Times are wall-clock seconds of each stage on its ranks (set-up, training and per-epoch validation), "
      "plus the fusion itself (and, for concurrent training, the probe that timed both models to size its rank "
      "groups). Improvements are relative to the mean total time, and shown only where every run "
      "of both methods reached the target (runs stopped by their epoch guard compare budgets, not times to the "
      "target; scripts/time_to_target.py re-reads their curves).\n\n";

  md += "## Time per stage (s)\n\n| method | stage | resolution | ranks | epochs | time (s) | val loss | stopped by |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : order) {
    const auto probe = over(of(runs, m), [](const MethodRun& r) { return r.split_probe_s; });
    if (probe.mean > 0)  // before the stages it sized
      md += fmt::format("| {} | split probe | | | | {} | | |\n", label(runs, m), pm_time(probe));
    for (const StageRow& row : stage_rows(runs, m))
      md += fmt::format("| {} | {} | 1/{} | {} | {} | {} | {} | {} |\n", label(runs, m), row.stage, row.resolution,
                        row.ranks, pm(row.epochs, 1), pm_time(row.time), pm(row.val, 4), row.stops);
    if (m != "baseline")
      md += fmt::format("| {} | fusion | | | | {} | | |\n", label(runs, m),
                        pm(over(of(runs, m), [](const MethodRun& r) { return r.fusion_s; }), 2));
  }

  md += "\n## Per-epoch breakdown per resolution (mean over the whole epochs of all runs)\n\n"
        "| resolution | ranks | epochs | io (s) | compute (s) | comm (s) | comm in flight (s) | validation (s) | "
        "epoch (s) | samples/s |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
  const std::vector<ResolutionRow> per_res = resolution_rows(runs);
  for (const ResolutionRow& row : per_res)
    md += fmt::format("| 1/{} | {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.0f} |\n",
                      row.resolution, row.ranks, row.epochs, row.io, row.compute, row.comm, row.comm_in_flight,
                      row.val, row.epoch, row.samples_per_s);
  md += "\nColumns of each epoch are its slowest rank's: io = waiting for batches (with the copy to the GPU and, "
        "with `reduce_on: device`, the reduction there), compute = training steps less comm, comm = waiting for the "
        "gradient all-reduce after backward and for the per-step loss all-reduce, validation = BN statistics and the "
        "validation pass; comm in flight (not a part of the epoch beside the others) = the time with a gradient "
        "all-reduce in flight, hidden behind backward or not, plus the loss all-reduce -- less comm, what backward "
        "hid (on the CPU an upper bound: MPI advances a reduction only inside MPI calls); epoch also holds what "
        "none of them does (loader restarts, mid-epoch checkpoints). "
        "Epochs continued from a mid-epoch checkpoint, and extra epochs cut short, are left out (their times "
        "cover a part of an epoch).\n";
  md += "\n![time per stage](chart.svg)\n\nEach run's per-epoch metrics: `<method>/seed<k>/<stage>/metrics.jsonl`.\n";
  md += "\n## Configuration\n\n```yaml\n" + ctx.config_text + "\n```\n";

  nlohmann::json j;
  j["title"] = ctx.title;
  j["date"] = date;
  j["ranks"] = ctx.ranks;
  j["device"] = ctx.device;
  j["mrmf"] = build_version();  // the build writing the report; each run says which finished it
  j["target_val_loss"] = ctx.target_val_loss;
  for (const auto& r : runs) j["runs"].push_back(method_run_to_json(r, /*with_history=*/false));
  for (const auto& m : order) {
    const auto rs = of(runs, m);
    const Stat tt = over(rs, [](const MethodRun& r) { return r.total_s; });
    // As the report's table: the mean over the runs that did not diverge.
    std::vector<double> finite_vals;
    for (const auto* r : rs)
      if (std::isfinite(r->final_val_loss)) finite_vals.push_back(r->final_val_loss);
    const Stat vl = stat(finite_vals);
    int reached = 0;
    for (const auto* r : rs) reached += r->reached_target;
    auto& jm = j["methods"][m];
    jm = {
        {"total_s_mean", tt.mean},
        {"total_s_sd", tt.sd},
        {"val_loss_mean", vl.n ? nlohmann::json(vl.mean) : nlohmann::json(nullptr)},
        {"val_loss_sd", vl.n ? nlohmann::json(vl.sd) : nlohmann::json(nullptr)},
        {"runs", rs.size()},
        {"diverged", rs.size() - finite_vals.size()},
        {"reached_target", reached},
        {"epochs_before_fusion", to_json(over(rs, [](const MethodRun& r) { return double(r.epochs_before_fusion); }))},
        {"epochs_after_fusion", to_json(over(rs, [](const MethodRun& r) { return double(r.epochs_after_fusion); }))},
        {"fusion_s", to_json(over(rs, [](const MethodRun& r) { return r.fusion_s; }))},
        {"split_probe_s", to_json(over(rs, [](const MethodRun& r) { return r.split_probe_s; }))}};
    for (const StageRow& row : stage_rows(runs, m))
      jm["stages"].push_back({{"stage", row.stage}, {"resolution", row.resolution}, {"ranks", row.ranks},
                              {"epochs", to_json(row.epochs)}, {"time_s", to_json(row.time)},
                              {"val_loss", to_json(row.val)}, {"stopped_by", row.stops}});
  }
  for (const ResolutionRow& row : per_res)
    j["per_resolution"][resolution_row_key(row, ctx.ranks)] = {{"resolution", row.resolution}, {"ranks", row.ranks},
                                           {"epochs", row.epochs},      {"io_s", row.io},
                                           {"compute_s", row.compute},  {"comm_s", row.comm},
                                           {"comm_in_flight_s", row.comm_in_flight},
                                           {"val_s", row.val},          {"epoch_s", row.epoch},
                                           {"samples_per_s", row.samples_per_s}};
  // The report's improvement rows, the same rule: null where the table says n/a, absent where it says "-".
  const auto base = of(runs, "baseline"), mrt = of(runs, "mrt");
  const auto pct_json = [](const std::optional<double>& p) { return p ? nlohmann::json(*p) : nlohmann::json(nullptr); };
  for (const auto& m : order) {
    if (!base.empty() && m != "baseline")
      j["methods"][m]["improvement_over_baseline_pct"] = pct_json(improvement_pct(of(runs, m), base));
    if (!mrt.empty() && m != "baseline" && m != "mrt")
      j["methods"][m]["improvement_over_mrt_pct"] = pct_json(improvement_pct(of(runs, m), mrt));
  }
  j["planned_runs"] = std::max(ctx.planned_runs, runs.size());
  j["partial"] = runs.size() < ctx.planned_runs;
  data::write_text_atomically((fs::path(dir) / "summary.json").string(), j.dump(2) + "\n");
  data::write_text_atomically((fs::path(dir) / "report.md").string(), md);
  data::write_text_atomically((fs::path(dir) / "chart.svg").string(), chart_svg(runs));
  return md;
}

}  // namespace mrmf
