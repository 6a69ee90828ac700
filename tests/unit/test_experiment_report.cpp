// An experiment's records: runs round-trip through the state file (NaN
// included) and its identity ignores seeds and methods; the report's time
// improvements only where every run reached the target, the per-epoch
// breakdown per resolution and rank count, concurrent training's split probe.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/gen_neuron.h"
#include "fusion/experiment_config.h"
#include "fusion/experiment_state.h"
#include "fusion/orchestrator.h"
#include "fusion/report.h"
#include "support/temp_dir.h"

using namespace mrmf;

TEST_CASE("experiment state: runs round-trip through JSON (NaN included), identity ignores seeds and methods",
          "[fusion][config]") {
  MethodRun r;
  r.method = "mrmf1";
  r.seed = 7;
  r.total_s = 12.5;
  r.fusion_s = 0.25;
  r.split_probe_s = 0.75;
  r.final_val_loss = std::numeric_limits<double>::quiet_NaN();  // a diverged run
  r.epochs_before_fusion = 5;
  r.epochs_after_fusion = 3;
  StageResult s;
  s.name = "mrmf1/stage1/coarse@2";
  s.role = "coarse";
  s.resolution = "2";
  s.epochs = 1;
  s.time_s = 1.5;
  s.final_val_loss = 0.3;
  s.stop_reason = "plateau";
  s.ranks = 2;
  EpochRecord e;
  e.epoch = 0;
  e.train_loss = 0.4;
  e.val_loss = std::numeric_limits<double>::infinity();
  e.io_s = 0.125;
  e.steps = 9;
  e.samples = 288;
  e.tag = "coarse";
  s.history = {e};
  r.stages = {s};
  const MethodRun b = method_run_from_json(nlohmann::json::parse(method_run_to_json(r).dump()));
  CHECK(b.method == r.method);
  CHECK(b.seed == r.seed);
  CHECK(b.total_s == r.total_s);
  CHECK(b.fusion_s == r.fusion_s);
  CHECK(b.split_probe_s == r.split_probe_s);
  CHECK(std::isnan(b.final_val_loss));
  CHECK(b.epochs_before_fusion == 5);
  CHECK(b.epochs_after_fusion == 3);
  REQUIRE(b.stages.size() == 1);
  CHECK(b.stages[0].name == s.name);
  CHECK(b.stages[0].stop_reason == "plateau");
  CHECK(b.stages[0].ranks == 2);
  REQUIRE(b.stages[0].history.size() == 1);
  CHECK(b.stages[0].history[0].train_loss == 0.4);
  CHECK(std::isnan(b.stages[0].history[0].val_loss));  // JSON has no infinity either: null reads back as NaN
  CHECK(b.stages[0].history[0].io_s == 0.125);
  CHECK(b.stages[0].history[0].samples == 288);
  // A state written before the split probe was recorded reads as no probe.
  auto old = method_run_to_json(r);
  old.erase("split_probe_s");
  CHECK(method_run_from_json(old).split_probe_s == 0);
  CHECK(b.stages[0].history[0].tag == "coarse");

  test::TempDir tmp("mrmf_identity");
  auto make_data = [&](const std::string& name, uint64_t seed, int64_t train) {
    data::NeuronGenOptions g;
    g.train = train;
    g.val = 16;
    g.test = 0;
    g.time_bins = 32;
    g.seed = seed;
    g.threads = 1;
    data::generate_neuron_inverter(tmp / name, g, /*overwrite=*/true);
  };
  make_data("ni.h5", 1, 32);
  const std::string run = "run: {data: {path: '" + (tmp / "ni.h5") + "'}}\n";
  auto identity = [&](const std::string& exp, const std::vector<std::string>& sets, int ranks = 1) {
    return experiment_identity(parse_experiment_config(run + exp, sets, "exp.yaml"), LaunchInfo{ranks, "cpu", 2});
  };
  const std::string base = "experiment: {target_val_loss: 0.1, methods: [baseline, mrmf1], seeds: [1]}";
  const std::string a = identity(base, {});
  // Seeds and methods may change; runtime.threads/device count as the
  // launch's effective values (here both 2 threads, cpu).
  CHECK(identity_differences(a, identity(base, {"experiment.seeds=[1,2,3]", "experiment.methods=[mrt]",
                                                "runtime.threads=3", "runtime.device=cpu"}))
            .empty());
  const auto d = identity_differences(
      a, identity(base, {"optimizer.lr=0.5", "experiment.shared_init=true", "runtime.allow_tf32=false"}, 2));
  REQUIRE(d.size() == 4);
  CHECK_THAT(d[0], Catch::Contains("experiment.shared_init: false -> true"));
  CHECK_THAT(d[1], Catch::Contains("launch.ranks: 1 -> 2"));
  CHECK_THAT(d[2], Catch::Contains("run.optimizer.lr") && Catch::Contains("-> 0.5"));
  CHECK_THAT(d[3], Catch::Contains("run.runtime.allow_tf32: true -> false"));
  // The stop rules' min_epochs and reference count, and only where set (an
  // experiment recorded before they counted keeps its identity: no key
  // appears for the defaults, and the run's own stop.plateau_reference,
  // which every stage overrides, is left out).
  CHECK(a.find("reference") == std::string::npos);
  CHECK_FALSE(YAML::Load(a)["experiment"]["stages"][0]["coarse_stop"]["min_epochs"]);
  const auto stops = identity_differences(
      a, identity(base, {"experiment.coarse_stop={threshold: 0.002, patience: 2, max_epochs: 20, min_epochs: 3, "
                         "reference: best}"}));
  REQUIRE(stops.size() == 1);  // the stages list, one line
  const std::string now = stops[0].substr(stops[0].find("->"));
  CHECK_THAT(stops[0], Catch::StartsWith("experiment.stages:"));
  CHECK(stops[0].find("min_epochs") > stops[0].find("->"));  // only on the new side
  CHECK_THAT(now, Catch::Contains("min_epochs: 3") && Catch::Contains("reference: best"));

  // The same path holding other data (regenerated with another seed, or more
  // samples) is another experiment; a copy of the same data is not.
  make_data("ni.h5", 2, 32);
  auto regenerated = identity_differences(a, identity(base, {}));
  REQUIRE(regenerated.size() == 2);  // both splits
  CHECK_THAT(regenerated[0], Catch::Contains("data.train: \"32 samples of (32, 3) float32, labels #"));
  CHECK_THAT(regenerated[1], Catch::Contains("data.val: \"16 samples"));
  make_data("ni.h5", 1, 48);
  regenerated = identity_differences(a, identity(base, {}));
  REQUIRE(regenerated.size() == 1);
  CHECK_THAT(regenerated[0], Catch::Contains("-> \"48 samples"));
  make_data("ni.h5", 1, 32);
  CHECK(identity_differences(a, identity(base, {})).empty());
}

TEST_CASE("report: improvements in time only where every run of both methods reached the target", "[fusion][report]") {
  const auto run = [](const char* method, uint64_t seed, double total_s, bool reached) {
    MethodRun r;
    r.method = method;
    r.seed = seed;
    r.total_s = total_s;
    r.final_val_loss = 0.1;
    r.reached_target = reached;
    return r;
  };
  const auto cells = [](const std::string& table, const std::string& name) {
    const auto at = table.find("| " + name + " |");
    REQUIRE(at != std::string::npos);
    return table.substr(at, table.find('\n', at) - at);
  };
  std::vector<MethodRun> runs = {run("baseline", 1, 100, true), run("baseline", 2, 100, true),
                                 run("mrt", 1, 90, true),       run("mrt", 2, 90, true),
                                 run("mrmf1", 1, 60, true),     run("mrmf1", 2, 80, true)};
  std::string t = summary_table(runs);
  // mrmf1: mean 70 s against 100 s and 90 s.
  CHECK(cells(t, "Improvement over baseline") == "| Improvement over baseline | - | +10.0 % | +30.0 % | ");
  CHECK_THAT(cells(t, "Improvement over MRT"), Catch::EndsWith("| +22.2 % | "));
  // One mrmf1 run stopped by its guard: its time is a budget, not a time to the target.
  runs[5].reached_target = false;
  t = summary_table(runs);
  CHECK(cells(t, "Improvement over baseline") ==
        "| Improvement over baseline | - | +10.0 % | n/a (target not reached) | ");
  CHECK_THAT(cells(t, "Improvement over MRT"), Catch::EndsWith("| n/a (target not reached) | "));
  CHECK(cells(t, "Reached target") == "| Reached target | 2/2 | 2/2 | 1/2 | ");
  // ... and a baseline that missed it leaves nothing to compare against.
  runs[5].reached_target = true;
  runs[0].reached_target = false;
  t = summary_table(runs);
  CHECK(cells(t, "Improvement over baseline") ==
        "| Improvement over baseline | - | n/a (target not reached) | n/a (target not reached) | ");
  CHECK_THAT(cells(t, "Improvement over MRT"), Catch::EndsWith("| +22.2 % | "));
  // Seeds added to one method (a resumed experiment): compared over the seeds both have.
  runs[0].reached_target = true;
  runs.push_back(run("mrmf1", 3, 10, true));
  t = summary_table(runs);
  CHECK_THAT(cells(t, "Improvement over baseline"), Catch::EndsWith("| +30.0 % | "));  // seeds 1-2: 70 s against 100 s
  // A diverged run (NaN loss) is counted apart from the losses of the others.
  runs[6].final_val_loss = std::numeric_limits<double>::quiet_NaN();
  runs[6].reached_target = false;
  t = summary_table(runs);
  CHECK_THAT(cells(t, "Validation loss (MSE)"), Catch::EndsWith("| 0.1000 ± 0.0000 (1 of 3 diverged) | "));
  CHECK_THAT(cells(t, "Improvement over baseline"), Catch::EndsWith("| +30.0 % | "));  // seed 3 has no baseline
  // summary.json carries the same numbers, null where the table says n/a, nothing where it says "-".
  test::TempDir tmp("mrmf_report_json");
  runs[3].reached_target = false;  // an MRT run stopped by its guard
  write_report(tmp.dir.string(), runs, ReportContext{});
  const auto j = nlohmann::json::parse(std::ifstream(tmp / "summary.json"))["methods"];
  CHECK(j["mrmf1"]["improvement_over_baseline_pct"].get<double>() == Approx(30.0));
  CHECK(j["mrt"]["improvement_over_baseline_pct"].is_null());
  CHECK(j["mrmf1"]["improvement_over_mrt_pct"].is_null());
  CHECK_FALSE(j["baseline"].contains("improvement_over_baseline_pct"));
  CHECK_FALSE(j["baseline"].contains("improvement_over_mrt_pct"));
  CHECK_FALSE(j["mrt"].contains("improvement_over_mrt_pct"));
}

TEST_CASE("report: the per-epoch breakdown is per resolution and rank count, without partial epochs",
          "[fusion][report]") {
  const auto epoch = [](double io, double compute, double val, double epoch_s, int64_t samples, int64_t resumed = 0) {
    EpochRecord e;
    e.io_s = io;
    e.compute_s = compute;
    e.val_s = val;
    e.epoch_s = epoch_s;
    e.samples = samples;
    e.resumed_at_step = resumed;
    e.comm_in_flight_s = compute / 10;
    return e;
  };
  const auto stage = [](const char* name, const char* res, int ranks, std::vector<EpochRecord> h) {
    StageResult s;
    s.name = name;
    s.resolution = res;
    s.ranks = ranks;
    s.epochs = static_cast<int64_t>(h.size());
    s.history = std::move(h);
    return s;
  };
  // A concurrent run on 2 ranks: its pre-fusion groups trained on one rank
  // each, its fine-tuning on both, and one fine-tuning epoch was continued
  // from a mid-epoch checkpoint (its times cover a part of an epoch).
  MethodRun r;
  r.method = "concurrent";
  r.seed = 1;
  r.stages = {
      stage("dense@1", "1", 1, {epoch(1, 20, 1, 22, 100), epoch(1, 20, 1, 22, 100)}),
      stage("coarse@2", "2", 1, {epoch(0.5, 10, 0.5, 11, 100)}),
      stage("finetune@1", "1", 2,
            {epoch(0.5, 10, 1, 12, 200), epoch(0.5, 12, 1, 14, 200), epoch(0.1, 1, 1, 2.5, 20, /*resumed=*/9)})};
  ReportContext ctx;
  ctx.title = "t";
  ctx.ranks = 2;
  ctx.planned_runs = 1;
  test::TempDir tmp("mrmf_report_breakdown");
  const std::string md = write_report(tmp.dir.string(), {r}, ctx);
  std::ifstream in(tmp.dir / "summary.json");
  const auto j = nlohmann::json::parse(in);
  const auto& pr = j["per_resolution"];
  REQUIRE(pr.size() == 3);
  // The launch's rank count keeps the plain key; the groups' rows say theirs.
  CHECK(pr["1"]["ranks"] == 2);
  CHECK(pr["1"]["epochs"] == 2);  // the partial epoch left out
  CHECK(pr["1"]["compute_s"].get<double>() == Approx(11));
  CHECK(pr["1"]["epoch_s"].get<double>() == Approx(13));
  CHECK(pr["1"]["comm_in_flight_s"].get<double>() == Approx(1.1));
  // samples over training time: 400 / (11 + 13), not a mean of the two rates.
  CHECK(pr["1"]["samples_per_s"].get<double>() == Approx(400.0 / 24.0));
  CHECK(pr["1 (1 rank)"]["epochs"] == 2);
  CHECK(pr["1 (1 rank)"]["io_s"].get<double>() == Approx(1));
  CHECK(pr["2 (1 rank)"]["resolution"] == "2");
  CHECK(pr["2 (1 rank)"]["samples_per_s"].get<double>() == Approx(100.0 / 10.5));
  CHECK_THAT(md, Catch::Contains("| 1/1 | 2 | 2 | 0.500 | 11.000 |") &&
                     Catch::Contains("| 1/1 | 1 | 2 | 1.000 | 20.000 |") && Catch::Contains("| 0.000 | 1.100 |"));
  // No probe (the epoch times were given): no row, no bar segment.
  CHECK_THAT(md, !Catch::Contains("split probe"));
  CHECK(j["methods"]["concurrent"]["split_probe_s"]["mean"] == 0);
}

TEST_CASE("report: concurrent training's split probe is a row of its own, a segment of its bar and in summary.json",
          "[fusion][report]") {
  MethodRun r;
  r.method = "concurrent";
  r.seed = 1;
  r.concurrent_groups = true;
  r.split_probe_s = 1.25;
  r.fusion_s = 0.5;
  StageResult s;
  s.name = "concurrent/finetune@1";
  s.role = "finetune";
  s.resolution = "1";
  s.epochs = 1;
  s.time_s = 8;
  r.stages = {s};
  r.total_s = r.split_probe_s + r.fusion_s + s.time_s;
  test::TempDir tmp("mrmf_report_probe");
  ReportContext ctx;
  ctx.planned_runs = 1;
  const std::string md = write_report(tmp.dir.string(), {r}, ctx);
  const auto row = md.find("| MRMF (concurrent) | split probe | | | | 1.25 | | |");
  INFO(md);
  REQUIRE(row != std::string::npos);
  CHECK(row < md.find("| MRMF (concurrent) | fusion |"));  // before the stages it sized
  const auto j = nlohmann::json::parse(std::ifstream(tmp / "summary.json"));
  CHECK(j["methods"]["concurrent"]["split_probe_s"]["mean"].get<double>() == Approx(1.25));
  CHECK(j["runs"][0]["split_probe_s"].get<double>() == Approx(1.25));
  std::ifstream svg_in(tmp / "chart.svg");
  const std::string svg((std::istreambuf_iterator<char>(svg_in)), std::istreambuf_iterator<char>());
  CHECK_THAT(svg, Catch::Contains(">split probe<"));
}

TEST_CASE("report: a first seed that diverged in its first stage hides neither the other seeds' stages nor their loss",
          "[fusion][report]") {
  const auto stage = [](const char* name, const char* role, double time_s, double val, const char* stop) {
    StageResult s;
    s.name = name;
    s.role = role;
    s.resolution = role == std::string("coarse") ? "2" : "1";
    s.epochs = 2;
    s.time_s = time_s;
    s.final_val_loss = val;
    s.stop_reason = stop;
    return s;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<MethodRun> runs;
  for (uint64_t seed : {1, 2, 3}) {
    MethodRun r;
    r.method = "mrmf1";
    r.seed = seed;
    if (seed == 1) {  // diverged in its coarse stage: the run ends there (Orchestrator::run_sequential)
      r.stages = {stage("mrmf1/stage1/coarse@2", "coarse", 3, nan, "diverged")};
      r.final_val_loss = nan;
    } else {
      r.stages = {stage("mrmf1/stage1/coarse@2", "coarse", 3, 0.3, "plateau"),
                  stage("mrmf1/stage1/dense@1", "dense", 5, 0.2, "plateau"),
                  stage("mrmf1/finetune@1", "finetune", 7, 0.1 * seed, "target")};
      r.final_val_loss = 0.1 * seed;
      r.reached_target = true;
    }
    r.total_s = 15;
    runs.push_back(r);
  }
  test::TempDir tmp("mrmf_report_diverged");
  ReportContext ctx;
  ctx.planned_runs = 3;
  const std::string md = write_report(tmp.dir.string(), runs, ctx);
  INFO(md);
  // Every stage has its row; the coarse stage's loss is the mean of the two
  // that did not diverge, and its stop reasons say one did.
  CHECK_THAT(md, Catch::Contains("| MRMF (one fusion) | stage1/coarse@2 | 1/2 | 1 | 2.0 ± 0.0 | 3.00 ± 0.00 | "
                                 "0.3000 ± 0.0000 | diverged, plateau |") &&
                     Catch::Contains("| MRMF (one fusion) | stage1/dense@1 | 1/1 |") &&
                     Catch::Contains("| MRMF (one fusion) | finetune@1 | 1/1 |"));
  const auto j = nlohmann::json::parse(std::ifstream(tmp / "summary.json"))["methods"]["mrmf1"];
  REQUIRE(j["stages"].size() == 3);
  CHECK(j["stages"][0]["val_loss"]["mean"].get<double>() == Approx(0.3));
  CHECK(j["stages"][0]["val_loss"]["n"] == 2);
  CHECK_THAT(j["stages"][0]["stopped_by"].get<std::string>(), Catch::Contains("diverged"));
  CHECK(j["stages"][2]["time_s"]["n"] == 2);
  // The method's loss as the table gives it: over the runs that did not diverge.
  CHECK(j["val_loss_mean"].get<double>() == Approx(0.25));
  CHECK(j["diverged"] == 1);
  // Every run diverged: no loss, null (not 0).
  for (auto& r : runs) {
    r.stages.resize(1);
    r.stages[0] = stage("mrmf1/stage1/coarse@2", "coarse", 3, nan, "diverged");
    r.final_val_loss = nan;
    r.reached_target = false;
  }
  write_report(tmp.dir.string(), runs, ctx);
  const auto k = nlohmann::json::parse(std::ifstream(tmp / "summary.json"))["methods"]["mrmf1"];
  CHECK(k["val_loss_mean"].is_null());
  CHECK(k["stages"][0]["val_loss"]["mean"].is_null());
  CHECK(k["diverged"] == 3);
}

TEST_CASE("report: the builds that finished the runs are named and round-trip through the state", "[fusion][report]") {
  StageResult s;
  s.name = "baseline/baseline@1";
  s.role = "baseline";
  s.resolution = "1";
  s.epochs = 1;
  s.time_s = 2;
  MethodRun a;
  a.method = "baseline";
  a.seed = 1;
  a.stages = {s};
  a.total_s = 2;
  a.mrmf = "0.1.0 (git 0123456789ab)";
  MethodRun b = a, c = a;
  b.seed = 2;
  c.seed = 3;
  c.mrmf = "";  // a run from the state of an older version
  CHECK(method_run_from_json(method_run_to_json(a)).mrmf == a.mrmf);
  nlohmann::json old = method_run_to_json(a);
  old.erase("mrmf");
  CHECK(method_run_from_json(old).mrmf.empty());
  test::TempDir tmp("mrmf_report_builds");
  ReportContext ctx;
  ctx.planned_runs = 3;
  std::string md = write_report(tmp.dir.string(), {a, b}, ctx);
  CHECK_THAT(md, Catch::Contains("; mrmf 0.1.0 (git 0123456789ab).\n"));
  md = write_report(tmp.dir.string(), {a, b, c}, ctx);
  CHECK_THAT(md, Catch::Contains("; runs by mrmf 0.1.0 (git 0123456789ab) (2), an earlier build (1).\n"));
  const auto j = nlohmann::json::parse(std::ifstream(tmp / "summary.json"));
  CHECK(j["runs"][0]["mrmf"] == a.mrmf);
  CHECK(j["runs"][2]["mrmf"] == "");
}
