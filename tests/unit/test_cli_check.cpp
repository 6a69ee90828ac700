// `mrmf train --check` and `mrmf experiment --check`: everything the command
// checks before training, the model or the plan printed, and nothing
// trained or written -- what a researcher runs on a login node before
// queueing hours of work.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_runner.h"

using namespace mrmf::clitest;

namespace {
// The line of `out` that starts with `prefix` (after its indent); empty if none.
std::string line_starting(const std::string& out, const std::string& prefix) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find_first_not_of(' ');
    if (a != std::string::npos && line.compare(a, prefix.size(), prefix) == 0) return line;
  }
  return "";
}
}  // namespace

TEST_CASE("cli: train --check checks the run and prints its model without training or writing", "[cli][check]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 128 --val 64 --test 64 --time-bins 64 --seed 3");
  const std::string cfg = write_config(s.dir, data);
  const fs::path out = s.dir / "run";
  Result r = run("train --config " + cfg + " --out " + out.string() + " --check");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("parameters: bottom") &&
                        Catch::Contains("checked: the configuration, the train and val data (1 rank(s), batch 32 per "
                                        "rank), the model; nothing was trained or written"));
  CHECK_FALSE(fs::exists(out));

  // What the run would find only when it starts: a shard smaller than a batch.
  r = run("train --config " + cfg + " --out " + out.string() + " --check --set train.batch_size=1000");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("expected at least one batch"));
  CHECK_FALSE(fs::exists(out));

  // A folder holding a run: refused as the run would be; with --force the
  // check passes and the run's files stay as they were -- also what a real
  // command tidies (an interrupted command's partial file, a --force's
  // half-moved run), and it takes no lock (it passes while another
  // process holds the folder's).
  r = run("train --config " + cfg + " --out " + out.string() + " --set stop.max_epochs=1");
  REQUIRE(r.code == 0);
  const std::string metrics = slurp(out / "metrics.jsonl"), checkpoint = slurp(out / "checkpoint.h5");
  std::ofstream(out / "summary.json.tmp.1.2") << "partial";
  fs::create_directories(out / ".previous_run.new");
  std::ofstream(out / ".previous_run.new" / "metrics.jsonl") << "{}\n";
  const int lock = ::open((out / ".mrmf.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX | LOCK_NB) == 0);
  r = run("train --config " + cfg + " --out " + out.string() + " --check");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("already holds results"));
  r = run("train --config " + cfg + " --out " + out.string() + " --check --force");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(slurp(out / "metrics.jsonl") == metrics);
  CHECK(slurp(out / "checkpoint.h5") == checkpoint);
  CHECK_FALSE(fs::exists(out / "previous_run"));
  CHECK(fs::exists(out / "summary.json.tmp.1.2"));
  CHECK(fs::exists(out / ".previous_run.new" / "metrics.jsonl"));
  ::close(lock);

  // A run that resumes from its own checkpoint reads --init no more (it may
  // be gone): neither does its check.
  const fs::path second = s.dir / "second", init = out / "checkpoint.h5", moved = s.dir / "moved.h5";
  r = run("train --config " + cfg + " --out " + second.string() + " --set stop.max_epochs=1 --init " + init.string());
  REQUIRE(r.code == 0);
  fs::rename(init, moved);
  r = run("train --config " + cfg + " --out " + second.string() + " --init " + init.string() + " --resume --check");
  INFO(r.out);
  CHECK(r.code == 0);
  r = run("train --config " + cfg + " --out " + (s.dir / "third").string() + " --init " + init.string() + " --check");
  INFO(r.out);
  CHECK(r.code == 2);  // a new run needs it
  CHECK_THAT(r.out, Catch::Contains("no such file"));
}

TEST_CASE("cli: experiment --check prints every stage of the plan without training or writing", "[cli][check]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [baseline, mrt, mrmf1]\n"
                                       "  coarse_stop: {threshold: 0.01, patience: 2, max_epochs: 3}\n"
                                       "  resolution_overrides: {\"2\": [\"train.batch_size=16\"]}\n");
  const fs::path out = s.dir / "exp";
  Result r = run("experiment --config " + exp.string() + " --out " + out.string() + " --check");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_FALSE(fs::exists(out));
  CHECK_THAT(r.out, Catch::Contains("plan on 1 rank(s): baseline seed 1, mrt seed 1, mrmf1 seed 1\n") &&
                        Catch::Contains("checked: the configuration, data, models, transfers and fusions of every "
                                        "stage (3 run(s) planned); nothing was trained or written"));
  // Each stage as the run will set it up: the rung's override (batch 16
  // at T = 32), the stop rules and the target.
  const std::string coarse = line_starting(r.out, "mrt/coarse@2");
  CHECK_THAT(coarse, Catch::Contains("[3, 32]") && Catch::Contains(" 16 ") &&
                         Catch::Contains("train loss down < 0.01 for 2 epoch(s), at most 3 epoch(s)"));
  const std::string dense = line_starting(r.out, "mrmf1/stage1/dense@1");
  CHECK_THAT(dense, Catch::Contains("[3, 64]") && Catch::Contains(" 32 "));
  CHECK_THAT(line_starting(r.out, "baseline/baseline@1"), Catch::Contains("val loss <= 0.001, at most 1 epoch(s)"));
  CHECK_THAT(line_starting(r.out, "mrmf1/stage1/fusion"),
             Catch::Contains("bottom from coarse@2, top from dense@1; optimizer state reset"));
  CHECK_THAT(line_starting(r.out, "mrt/transfer"), Catch::Contains("top fresh"));
  CHECK(!line_starting(r.out, "mrmf1/finetune@1").empty());

  // --resume: the runs finished earlier are kept, the methods this command
  // adds are checked and described; nothing in the folder changes.
  r = run("experiment --config " + exp.string() + " --out " + out.string() + " --methods baseline");
  REQUIRE(r.code == 0);
  const std::string state = slurp(out / "experiment_state.json"), report = slurp(out / "report.md");
  r = run("experiment --config " + exp.string() + " --out " + out.string() +
          " --resume --check --set experiment.methods=[baseline,mrmf1]");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("plan on 1 rank(s): baseline seed 1 (finished: kept), mrmf1 seed 1\n") &&
                        Catch::Contains("(2 run(s) planned)"));
  CHECK(!line_starting(r.out, "mrmf1/stage1/dense@1").empty());
  CHECK(line_starting(r.out, "mrt/").empty());
  CHECK(slurp(out / "experiment_state.json") == state);
  CHECK(slurp(out / "report.md") == report);
  CHECK_FALSE(fs::exists(out / "mrmf1"));
  fs::remove_all(out);

  // A stage whose shard is smaller than a batch: the error the experiment
  // gives before training, naming the stage.
  r = run("experiment --config " + exp.string() + " --out " + out.string() + " --check --set train.batch_size=1000");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("checked before training: stage baseline@1 (1 rank(s)) cannot run") &&
                        Catch::Contains("expected at least one batch"));
  CHECK_FALSE(fs::exists(out));
}
