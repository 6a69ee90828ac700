// `mrmf experiment` as a user runs it: a run that dies part-way and
// --resume, MRT's resampled top, bad input refused before training, a
// diverging run recorded as such, fine-tuning overrides. The runner and the
// tiny data: tests/support/cli_runner.h.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "data/formats.h"
#include "data/h5file.h"
#include "support/cli_runner.h"

using namespace mrmf;
using namespace mrmf::clitest;

TEST_CASE("cli: an experiment that dies part-way keeps the runs it finished, and --resume runs the rest",
          "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  if (!has_command("experiment")) {
    WARN("this mrmf has no experiment subcommand: skipping");
    return;
  }
  Scratch s;
  // baseline: 1 epoch of 8 steps; MRT's coarse stage then runs up to 3 epochs
  // (threshold 0: no plateau) and the process dies abruptly at its step 12.
  const fs::path exp = tiny_experiment(s, 256,
                                       "  methods: [baseline, mrt]\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 3}\n");
  Result r;
  const std::string out = (s.dir / "exp").string();
  r = run_prefixed("MRMF_FAULT_EXIT=0:12 ", "experiment --config " + exp.string() + " --out " + out);
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("MRMF_FAULT_EXIT"));
  REQUIRE(fs::exists(fs::path(out) / "report.md"));
  REQUIRE(fs::exists(fs::path(out) / "summary.json"));
  const auto j = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  REQUIRE(j["runs"].size() == 1);
  CHECK(j["runs"][0]["method"] == "baseline");
  CHECK(j["runs"][0]["stages"][0]["stop_reason"] == "max_epochs");
  // The report says it is partial, and how to go on.
  CHECK(j["partial"] == true);
  CHECK(j["planned_runs"] == 2);
  CHECK_THAT(slurp(fs::path(out) / "report.md"),
             Catch::Contains("Partial: 1 of 2 runs finished") && Catch::Contains("--resume"));

  // Refused: --resume with --force; --resume with a key that changes what the
  // runs compute (named, old -> new); a plain re-run. The saved state stays.
  const std::string base = "experiment --config " + exp.string() + " --out " + out;
  const std::string state = slurp(fs::path(out) / "experiment_state.json");
  r = run(base + " --resume --force");
  CHECK(r.code == 2);
  r = run(base + " --resume --set experiment.target_val_loss=0.002 --set train.batch_size=16");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("another configuration") &&
                        Catch::Contains("experiment.target_val_loss: 0.001 -> 0.002") &&
                        Catch::Contains("run.train.batch_size: 32 -> 16"));
  r = run(base);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--resume"));
  CHECK(slurp(fs::path(out) / "experiment_state.json") == state);

  // --resume keeps the finished baseline (its files untouched, its numbers
  // as measured) and continues MRT inside its coarse stage, from the
  // checkpoint of its epoch 0 (it died at step 12: epoch 1 of 8-step
  // epochs). Other threads than the first command's would put times that
  // do not compare in one table: refused.
  REQUIRE(fs::exists(fs::path(out) / "mrt/seed1/coarse/checkpoint.h5"));
  const std::string baseline_metrics = slurp(fs::path(out) / "baseline/seed1/baseline/metrics.jsonl");
  REQUIRE_FALSE(baseline_metrics.empty());
  r = run(base + " --resume --threads 3");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("launch.threads:") && Catch::Contains("-> 3"));
  r = run(base + " --resume");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("method baseline seed 1: finished earlier"));
  CHECK_THAT(r.out, Catch::Contains("mrt/coarse@2: resumed from") && Catch::Contains("at epoch 1"));
  CHECK(slurp(fs::path(out) / "baseline/seed1/baseline/metrics.jsonl") == baseline_metrics);
  const auto j2 = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  REQUIRE(j2["runs"].size() == 2);
  CHECK(j2["partial"] == false);
  CHECK(j2["runs"][0]["total_s"] == j["runs"][0]["total_s"]);
  CHECK(j2["runs"][1]["method"] == "mrt");
  CHECK(j2["runs"][1]["stages"].size() == 2);
  CHECK(j2["per_resolution"].contains("2"));  // the breakdown keeps the resumed runs' epochs
  // The resumed MRT run equals an uninterrupted one (deterministic CPU mode):
  // the same epochs, losses and stops, the epochs before the interruption
  // included.
  {
    const std::string ref = (s.dir / "exp_ref").string();
    r = run("experiment --config " + exp.string() + " --out " + ref + " --methods mrt");
    REQUIRE(r.code == 0);
    const auto jr = nlohmann::json::parse(std::ifstream(fs::path(ref) / "summary.json"));
    const auto& a = j2["runs"][1];
    const auto& b = jr["runs"][0];
    CHECK(a["final_val_loss"] == b["final_val_loss"]);
    CHECK(a["epochs_before_fusion"] == b["epochs_before_fusion"]);
    CHECK(j2["per_resolution"]["2"]["epochs"] == jr["per_resolution"]["2"]["epochs"]);  // histories complete
    for (size_t k = 0; k < 2; ++k) {
      CHECK(a["stages"][k]["epochs"] == b["stages"][k]["epochs"]);
      CHECK(a["stages"][k]["final_val_loss"] == b["stages"][k]["final_val_loss"]);
      CHECK(a["stages"][k]["stop_reason"] == b["stages"][k]["stop_reason"]);
    }
    CHECK(slurp(fs::path(out) / "mrt/seed1/coarse/metrics.jsonl").size() > 0);
    // Pre-fusion checkpoints are removed once a run is finished; the final model stays.
    CHECK_FALSE(fs::exists(fs::path(out) / "mrt/seed1/coarse/checkpoint.h5"));
    CHECK(fs::exists(fs::path(out) / "mrt/seed1/finetune/checkpoint.h5"));
    // Every coarse epoch's training loss, the resumed ones from metrics.jsonl.
    auto losses = [&](const fs::path& m) {
      std::vector<double> v;
      std::ifstream in(m);
      for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line)["train_loss"]);
      return v;
    };
    CHECK(losses(fs::path(out) / "mrt/seed1/coarse/metrics.jsonl") ==
          losses(fs::path(ref) / "mrt/seed1/coarse/metrics.jsonl"));
  }
  CHECK_FALSE(Catch::Contains("Partial").match(slurp(fs::path(out) / "report.md")));

  // Another seed on a finished experiment runs only the new seed's runs.
  r = run(base + " --resume --set experiment.seeds=[1,2] --methods baseline");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("method baseline seed 1: finished earlier") &&
                        Catch::Contains("method baseline seed 2 ==="));
  const auto j3 = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  CHECK(j3["runs"].size() == 3);  // mrt seed 1, no longer planned, is kept
  CHECK(j3["methods"]["baseline"]["runs"] == 2);

  // A damaged state, or a report without one: named, exit 2, nothing run.
  std::ofstream(fs::path(out) / "experiment_state.json") << "{\"version\": 1, \"runs\": [";
  r = run(base + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("experiment_state.json is damaged"));
  {
    auto st = nlohmann::json::parse(state);
    st["identity"] = "run: [unclosed";
    std::ofstream(fs::path(out) / "experiment_state.json") << st.dump();
    r = run(base + " --resume");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("experiment_state.json is damaged"));
  }
  fs::remove(fs::path(out) / "experiment_state.json");
  r = run(base + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("has a report but no experiment_state.json"));

  // --force that dies in its first run: the old report and state moved
  // aside (they describe another experiment, and are not lost), the new
  // one's state is there, and --resume runs the plan it recorded -- MRT
  // too, although this command names only baseline.
  const std::string old_report = slurp(fs::path(out) / "report.md");
  std::ofstream(fs::path(out) / "experiment_state.json") << "{\"stand-in\": 1}\n";  // removed above
  r = run_prefixed("MRMF_FAULT_EXIT=0:3 ", base + " --force");
  CHECK(r.code != 0);
  CHECK_FALSE(fs::exists(fs::path(out) / "report.md"));
  REQUIRE(fs::exists(fs::path(out) / "experiment_state.json"));
  {
    std::vector<fs::path> aside;
    for (const auto& e : fs::directory_iterator(out))
      if (e.path().filename().string().rfind("replaced_", 0) == 0) aside.push_back(e.path());
    REQUIRE(aside.size() == 1);
    CHECK_THAT(r.out, Catch::Contains("moved to " + aside[0].string()));
    CHECK(slurp(aside[0] / "report.md") == old_report);
    for (const char* name : {"summary.json", "chart.svg"}) CHECK(fs::exists(aside[0] / name));
    CHECK(slurp(aside[0] / "experiment_state.json") == "{\"stand-in\": 1}\n");
  }
  // The state records which runs had started: only the baseline, which died.
  {
    const auto st = nlohmann::json::parse(std::ifstream(fs::path(out) / "experiment_state.json"));
    REQUIRE(st["started"].size() == 1);
    CHECK(st["started"][0]["method"] == "baseline");
    CHECK(st["started"][0]["seed"] == 1);
    CHECK(st["plan"].size() == 2);
  }
  // Seed 2's baseline is added by this command: it starts clean, although
  // its folder holds the finished checkpoint of the experiment --force
  // replaced (that one must not be "resumed").
  REQUIRE(fs::exists(fs::path(out) / "baseline/seed2/baseline/checkpoint.h5"));
  r = run(base + " --resume --methods baseline --set experiment.seeds=[1,2]");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_FALSE(Catch::Contains("seed2/baseline/checkpoint.h5").match(r.out));
  // MRT seed 1 was planned but had not started: it starts clean too, not
  // from the fine-tuned model the replaced experiment left in its folder.
  // (The baseline that died had written no checkpoint: nothing resumes.)
  CHECK_FALSE(Catch::Contains("mrt/seed1/finetune/checkpoint.h5").match(r.out));
  CHECK_FALSE(Catch::Contains("resumed from").match(r.out));
  const auto j4 = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  CHECK(j4["runs"].size() == 3);
  CHECK(j4["partial"] == false);
  CHECK_THAT(slurp(fs::path(out) / "report.md"),
             Catch::Contains("# resumed (--resume) with:") && Catch::Contains("experiment.methods=[baseline]"));
}

TEST_CASE("cli: experiment with mrt_top: resample carries MRT's top over, and records the key", "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [mrt]\n  mrt_top: resample\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n");
  const std::string out = (s.dir / "exp").string();
  const Result r = run("experiment --config " + exp.string() + " --out " + out);
  INFO(r.out);
  REQUIRE(r.code == 0);
  // T = 32 -> 64 with the tiny model's three conv + pool blocks: 16 channels at 2 -> 6 positions.
  CHECK_THAT(r.out, Catch::Contains("resampled from [16, 2] to [16, 6] (mrt_top: resample)"));
  CHECK_THAT(slurp(fs::path(out) / "experiment_state.json"), Catch::Contains("mrt_top: resample"));
}

TEST_CASE("cli: a new experiment does not empty the run folders an earlier one left without a report",
          "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128, "  methods: [mrt]\n");
  const fs::path out = s.dir / "exp", kept = out / "mrt" / "seed1" / "finetune" / "checkpoint.h5";
  fs::create_directories(kept.parent_path());
  std::ofstream(kept) << "an earlier experiment's model";
  Result r = run("experiment --config " + exp.string() + " --out " + out.string());
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("already holds results (mrt/seed1)") && Catch::Contains("--force"));
  CHECK(slurp(kept) == "an earlier experiment's model");
  // Nor does --resume, with no record of what the folders hold: it emptied
  // them, saying "nothing to resume" (session 57).
  r = run("experiment --config " + exp.string() + " --out " + out.string() + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("holds run folders of this plan (mrt/seed1) but no experiment_state.json"));
  CHECK(slurp(kept) == "an earlier experiment's model");
  // Another method's folder is not this plan's: a baseline runs beside it.
  r = run("experiment --config " + exp.string() + " --out " + out.string() + " --methods baseline");
  CHECK(r.code == 0);
  CHECK(slurp(kept) == "an earlier experiment's model");
  // A hand-edited state whose plan names a folder outside --out: refused,
  // the folder kept (it was emptied before the method name failed).
  const fs::path victim = s.dir / "victim" / "seed1" / "data.txt";
  fs::create_directories(victim.parent_path());
  std::ofstream(victim) << "not the experiment's";
  auto st = nlohmann::json::parse(std::ifstream(out / "experiment_state.json"));
  st["plan"].push_back({{"method", "../victim"}, {"seed", 1}});
  std::ofstream(out / "experiment_state.json") << st.dump();
  r = run("experiment --config " + exp.string() + " --out " + out.string() + " --methods baseline --resume");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("experiment_state.json is damaged: its plan names '../victim'"));
  CHECK(slurp(victim) == "not the experiment's");
}

TEST_CASE("cli: experiment bad input is refused before training, and the 1-rank concurrent fallback keeps its own runs",
          "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [mrmf1, concurrent]\n"
                                       "  coarse_stop: {threshold: 0.1, patience: 3, max_epochs: 2}\n"
                                       "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n");
  Result r;
  const std::string base = "experiment --config " + exp.string() + " --out ";

  // --methods is validated like the config's list, before anything runs.
  for (const char* m : {"mrmf5", "magic", "mrmf99999999999"}) {
    const fs::path out = s.dir / (std::string("bad_") + m);
    r = run(base + out.string() + " --methods baseline " + m);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(std::string("'") + m + "'") || Catch::Contains("needs"));
    CHECK_FALSE(fs::exists(out / "baseline"));
  }
  // A rung the model cannot take (T = 64 / 4 = 16 is too short for the tiny
  // model's three conv blocks): refused before the baseline trains.
  {
    const fs::path out = s.dir / "too_small";
    r = run(base + out.string() + " --methods baseline mrmf2 --set experiment.ladder=[[4],[2],[1]]");
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("T = 16 is too short") && Catch::Contains("experiment key 'ladder'"));
    CHECK_FALSE(fs::exists(out / "baseline"));
  }
  {  // a rung whose factor does not divide T = 64: named as the experiment's key
    const fs::path out = s.dir / "not_dividing";
    r = run(base + out.string() + " --methods baseline mrmf1 --set experiment.ladder=[[3],[1]]");
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("experiment key 'ladder'") && Catch::Contains("rung [3]") &&
                          Catch::Contains("does not divide") && !Catch::Contains(".cpp:"));
  }

  // One rank: concurrent falls back to sequential stages, with a notice, in
  // its own folder (mrmf1's runs are not overwritten), and its bar in the
  // chart is the sum of its stages.
  const fs::path out = s.dir / "exp";
  r = run(base + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("running the one-fusion stages sequentially"));
  CHECK_THAT(r.out, Catch::Contains("stage 1 coarse stop rule (threshold 0.1, patience 3, min_epochs 0) cannot fire "
                                    "within its 2-epoch guard"));
  for (const char* m : {"mrmf1", "concurrent"})
    for (const char* st : {"stage1_coarse", "stage1_dense", "finetune"}) {
      INFO(m << " " << st);
      CHECK(fs::exists(out / m / "seed1" / st / "metrics.jsonl"));
    }
  const auto j = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  REQUIRE(j["runs"].size() == 2);
  const auto& conc = j["runs"][1];
  CHECK(conc["method"] == "concurrent");
  CHECK(conc["concurrent_groups"] == false);
  for (const auto& st : conc["stages"]) CHECK(st["name"].get<std::string>().rfind("concurrent/", 0) == 0);
  const std::string svg = slurp(out / "chart.svg");
  const size_t at = svg.find(">MRMF (concurrent, run sequentially)<");  // one rank: no groups
  REQUIRE(at != std::string::npos);
  const size_t label = svg.find(" s</text>", svg.find("</rect>", at));
  const size_t open = svg.rfind('>', label);
  CHECK(std::stod(svg.substr(open + 1, label - open - 1)) == Approx(conc["total_s"].get<double>()).margin(0.051));
  {  // the axis's five tick labels are distinct (a run of seconds must not read 0 0 1 1 1)
    std::set<std::string> ticks;
    const std::string mark = "text-anchor=\"middle\">";
    for (size_t p = svg.find(mark); p != std::string::npos; p = svg.find(mark, p + 1)) {
      const size_t b = p + mark.size();
      const std::string t = svg.substr(b, svg.find('<', b) - b);
      if (t != "seconds") ticks.insert(t);
    }
    CHECK(ticks.size() == 5);
  }

  // summary.json carries the report's numbers: per-stage statistics and the
  // per-resolution breakdown, consistent with the runs' own records.
  int64_t epochs_at[3] = {0, 0, 0};
  for (const auto& run : j["runs"])
    for (const auto& st : run["stages"])
      epochs_at[std::stoi(st["resolution"].get<std::string>())] += st["epochs"].get<int64_t>();
  CHECK(j["per_resolution"]["1"]["epochs"] == epochs_at[1]);
  CHECK(j["per_resolution"]["2"]["epochs"] == epochs_at[2]);
  for (const char* k : {"io_s", "compute_s", "comm_s", "comm_in_flight_s", "val_s", "epoch_s", "samples_per_s"})
    CHECK(j["per_resolution"]["1"][k].get<double>() >= 0);
  const auto& m1 = j["methods"]["mrmf1"];
  CHECK(m1["stages"].size() == 3);
  CHECK(m1["stages"][0]["epochs"]["mean"] == j["runs"][0]["stages"][0]["epochs"]);
  CHECK(m1["epochs_after_fusion"]["mean"] == j["runs"][0]["epochs_after_fusion"]);
  CHECK(m1.contains("fusion_s"));
  const std::string md = slurp(out / "report.md");
  CHECK_THAT(md, Catch::Contains("## Time per stage") && Catch::Contains("## Per-epoch breakdown per resolution") &&
                     Catch::Contains("Improvement over MRT"));

  // A val split at another resolution than the train split: refused before
  // --force sets the finished experiment aside (it used to be found when
  // the first stage's trainer opened it, after the earlier runs' folders
  // had been emptied).
  const std::string val128 = (s.dir / "ni_t128.h5").string();
  make_tiny_ni(val128, " --train 64 --val 64 --test 64 --time-bins 128 --seed 4");
  const std::string ckpt = slurp(out / "mrmf1/seed1/finetune/checkpoint.h5");
  r = run(base + out.string() + " --force --set data.val_files=" + val128);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("the val split (" + val128 + ") has samples of [3, 128]") &&
                        Catch::Contains("the train split (") && Catch::Contains("of [3, 64]; expected the same"));
  CHECK(slurp(out / "report.md") == md);
  CHECK(slurp(out / "mrmf1/seed1/finetune/checkpoint.h5") == ckpt);
}

TEST_CASE("cli: an experiment run that diverges is recorded as diverged and the others go on", "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [baseline, mrmf1]\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  resolution_overrides: {\"2\": [optimizer.lr=1.0e+8]}\n");
  const fs::path out = s.dir / "exp";
  const Result r =
      run("experiment --config " + exp.string() + " --out " + out.string() + " --set experiment.seeds=[1,2]");
  INFO(r.out);
  REQUIRE(r.code == 0);  // every planned run ran
  const auto j = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  REQUIRE(j["runs"].size() == 4);
  for (const auto& run : j["runs"]) {
    INFO(run.dump());
    if (run["method"] == "mrmf1") {
      CHECK(run["final_val_loss"].is_null());  // NaN
      CHECK(run["reached_target"] == false);
      CHECK(run["stages"].size() == 1);  // the coarse stage that diverged ends the run
      CHECK(run["stages"][0]["stop_reason"] == "diverged");
    }
  }
  const std::string report = slurp(out / "report.md");
  CHECK_THAT(report, Catch::Contains("| diverged |") && !Catch::Contains("Partial"));
}

TEST_CASE("cli: experiment.finetune_overrides reach the stages that fine-tune a transferred or fused model only",
          "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [baseline, mrt, mrmf1]\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  finetune_overrides: [schedule.warmup_steps=1000, train.freeze=bottom]\n");
  const fs::path out = s.dir / "exp";
  const Result r = run("experiment --config " + exp.string() + " --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  // The frozen bottom of a transferred or fused model came from pretraining:
  // no warning that it stays random (train's warning when nothing loads it).
  CHECK_FALSE(Catch::Contains("stays frozen at its random").match(r.out));
  // The learning rate each stage's first epoch started with (metrics.jsonl records it).
  const auto first_lr = [&](const std::string& method, const std::string& stage) {
    std::ifstream m(out / method / "seed1" / stage / "metrics.jsonl");
    std::string line;
    REQUIRE(std::getline(m, line));
    return nlohmann::json::parse(line)["lr"].get<double>();
  };
  const double base = first_lr("baseline", "baseline");
  CHECK(first_lr("mrmf1", "stage1_dense") == base);  // the same rung, not fine-tuning
  CHECK(first_lr("mrt", "finetune") == Approx(base / 1000));
  CHECK(first_lr("mrmf1", "finetune") == Approx(base / 1000));
  // Part of the experiment's identity: a resume with other overrides is refused.
  const Result again = run("experiment --config " + exp.string() + " --out " + out.string() +
                           " --resume --set experiment.finetune_overrides=[schedule.warmup_steps=10]");
  INFO(again.out);
  CHECK(again.code == 2);
  CHECK_THAT(again.out, Catch::Contains("finetune_overrides"));
}
