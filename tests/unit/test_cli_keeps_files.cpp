// What is already saved is never lost: the `mrmf` command's outputs
// against --force, a full disk, a failing --force (the earlier run or
// report put back) and SIGTERM (a checkpoint that --resume continues).
// The rest of the CLI's behaviour: test_cli.cpp; the shared runner:
// tests/support/cli_runner.h.
#include <hdf5.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

using namespace mrmf;
using namespace mrmf::clitest;

namespace {
// A tiny Neuron Inverter file, its run configuration, and one epoch
// trained from it in <scratch>/run: what the cases below keep or replace.
struct TrainedRun {
  std::string data, cfg, out;
};
TrainedRun trained_run(const Scratch& s) {
  TrainedRun t;
  t.data = (s.dir / "ni.h5").string();
  make_tiny_ni(t.data, " --train 64 --val 32 --test 32 --seed 1 --time-bins 64");
  t.cfg = write_config(s.dir, t.data);
  t.out = (s.dir / "run").string();
  REQUIRE(run("train --config " + t.cfg + " --out " + t.out + " --set stop.max_epochs=1").code == 0);
  return t;
}
}  // namespace

TEST_CASE("cli: results already written are not replaced without --force, inputs never", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const TrainedRun t = trained_run(s);
  const std::string &data = t.data, &cfg = t.cfg, &out = t.out;
  const auto size_of = [](const fs::path& p) { return fs::file_size(p); };
  const fs::path metrics = fs::path(out) / "metrics.jsonl", ck = fs::path(out) / "checkpoint.h5";
  const auto metrics_size = size_of(metrics), data_size = size_of(data);

  // train into a folder holding a run: refused, the run untouched; --force replaces it.
  Result r = run("train --config " + cfg + " --out " + out + " --set optimizer.lr=1e-2");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("already holds results") && Catch::Contains("--resume") &&
                        Catch::Contains("--force") && Catch::Contains("checkpoint.h5"));
  CHECK(size_of(metrics) == metrics_size);
  r = run("train --config " + cfg + " --out " + out + " --set optimizer.lr=1e-2 --set stop.max_epochs=1 --force");
  CHECK(r.code == 0);
  // --resume of the finished run: nothing to train, and the summary keeps its loss.
  r = run("train --config " + cfg + " --out " + out + " --set optimizer.lr=1e-2 --set stop.max_epochs=1 --resume");
  CHECK(r.code == 0);
  const auto summary = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  CHECK(summary["epochs"] == 1);
  CHECK(summary["final_val_loss"].get<double>() > 0);

  // predict: never onto its data or checkpoint (also through a link), an existing file only with --force.
  const fs::path link = s.dir / "link.h5";
  fs::create_symlink(data, link);
  for (const std::string& target : {data, ck.string(), link.string()}) {
    r = run("predict --checkpoint " + ck.string() + " --data " + link.string() + " --out " + target + " --force");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("same file as the input"));
  }
  CHECK(size_of(data) == data_size);
  // The data a --set names instead of --data are inputs too.
  const fs::path other = s.dir / "other.h5";
  fs::copy_file(data, other);
  r = run("predict --checkpoint " + ck.string() + " --data " + data + " --set data.path=" + other.string() + " --out " +
          other.string() + " --force");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("same file as the input"));
  CHECK(size_of(other) == data_size);
  // Nor a file the input reads through HDF5 external links: --force
  // replaced the data behind them (session 57).
  {
    const fs::path view = s.dir / "view.h5";
    const hid_t f = H5Fcreate(view.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(f >= 0);
    for (const char* split : {"train", "val", "test"})
      for (const char* what : {"_frames", "_unitStar_par"}) {
        const std::string name = std::string(split) + what;
        REQUIRE(H5Lcreate_external(other.c_str(), name.c_str(), f, name.c_str(), H5P_DEFAULT, H5P_DEFAULT) >= 0);
      }
    H5Fclose(f);
    r = run("predict --checkpoint " + ck.string() + " --data " + view.string() + " --out " + other.string() +
            " --force");
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("reads through an HDF5 link or external storage"));
    r = run("downsample --in " + view.string() + " --out " + other.string() + " --factor 2 --axes t --force");
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("reads through an HDF5 link or external storage"));
    CHECK(size_of(other) == data_size);
    // The checkpoint's input layout is the one its weights know: the other
    // one gave a loss without an error.
    r = run("eval --checkpoint " + ck.string() + " --data " + data + " --split test --set data.layout=reinterpret");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("was trained on input laid out as 'transpose'"));
  }
  // A path is the string it is, not YAML: ' #' starts no comment.
  const fs::path odd = s.dir / "run #2";
  fs::create_directories(odd);
  fs::copy_file(data, odd / "ni.h5");
  r = run("predict --checkpoint " + ck.string() + " --data '" + (odd / "ni.h5").string() + "' --out '" +
          (odd / "pred.h5").string() + "'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(fs::exists(odd / "pred.h5"));
  const std::string pred = (s.dir / "pred.h5").string();
  REQUIRE(run("predict --checkpoint " + ck.string() + " --data " + data + " --out " + pred).code == 0);
  r = run("predict --checkpoint " + ck.string() + " --data " + data + " --out " + pred);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("already exists") && Catch::Contains("--force"));
  CHECK(run("predict --checkpoint " + ck.string() + " --data " + data + " --out " + pred + " --force").code == 0);

  // ... nor into a (CosmoFlow) data folder, whatever --force says.
  fs::create_directories(s.dir / "cf" / "test");
  r = run("predict --checkpoint " + ck.string() + " --data " + (s.dir / "cf").string() + " --out " +
          (s.dir / "cf" / "test" / "a.h5").string() + " --force");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("is inside the data folder"));
  // ... nor beside CosmoFlow files named by a glob, a list or one file (the
  // next command that read the folder took the output for a data file).
  {
    const fs::path t = s.dir / "cf" / "test";
    std::ofstream(t / "c0.h5") << "x";
    for (const std::string& d : {(t / "*.h5").string(), (t / "c0.h5").string(), (t / "c0.h5").string() + ","}) {
      r = run("predict --checkpoint " + ck.string() + " --data '" + d + "' --set data.format=cosmoflow --out " +
              (t / "pred.h5").string());
      INFO(d << ": " << r.out);
      CHECK(r.code == 2);
      CHECK_THAT(r.out, Catch::Contains("is in the folder of the CosmoFlow input " + (t / "c0.h5").string()));
    }
    fs::remove(t / "c0.h5");
  }
  // An --out that cannot be written is refused before the split is computed.
  for (const auto& [o, why] : {std::pair<std::string, std::string>{(s.dir / "newdir").string() + "/", "names a folder"},
                               {data + "/pred.h5", "is a file, so the folder cannot be made"}}) {
    r = run("predict --checkpoint " + ck.string() + " --data " + data + " --out " + o);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(why));
  }
  CHECK(!fs::exists(s.dir / "newdir"));
  r = run("predict --checkpoint " + ck.string() + " --data " + data + " --out /proc/mrmf_sub/p.h5");  // root too
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("cannot write in /proc ("));

  // train --force with --init from the run it replaces: the checkpoint is read before it goes.
  r = run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=1 --force --init " + ck.string());
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("initialized"));

  // train: an input that is a file the run writes or sets aside is refused,
  // --force or not (the data named checkpoint.h5 were replaced by the new
  // checkpoint); so are a data folder that is --out and an --out under a file.
  {
    const fs::path d1 = s.dir / "d1";
    fs::create_directories(d1 / "previous_run");
    fs::copy_file(data, d1 / "checkpoint.h5");
    fs::copy_file(data, d1 / "previous_run" / "ni.h5");
    for (const fs::path& in : {d1 / "checkpoint.h5", d1 / "previous_run" / "ni.h5"}) {
      r = run("train --config " + cfg + " --out " + d1.string() + " --force --set data.path=" + in.string());
      INFO(r.out);
      CHECK(r.code == 2);
      CHECK_THAT(r.out, Catch::Contains("data.path " + in.string()) &&
                            (Catch::Contains("a file this run writes") || Catch::Contains("then deleted")));
      CHECK(size_of(in) == data_size);
    }
    fs::copy_file(cfg, d1 / "summary.json");
    r = run("train --config " + (d1 / "summary.json").string() + " --out " + d1.string() + " --force");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("--config") && Catch::Contains("a file this run writes"));
    const fs::path cf = s.dir / "cf";
    r = run("train --config " + cfg + " --out " + (cf / "test").string() +
            " --set data.format=cosmoflow --set data.path=" + cf.string());
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("as a data folder"));
    r = run("train --config " + cfg + " --out " + data + "/run");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(data + " is a file, so the folder cannot be made"));
  }

  // downsample: the output may not be the input under another name.
  r = run("downsample --in " + link.string() + " --out " + data + " --factor 2 --force");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--out must differ from --in"));
  CHECK(size_of(data) == data_size);

  // experiment into a folder holding a report: refused before any training.
  const fs::path exp_out = s.dir / "exp";
  fs::create_directories(exp_out);
  std::ofstream(exp_out / "report.md") << "an earlier report\n";
  std::ofstream(s.dir / "exp.yaml") << "base: tiny.yaml\nexperiment: {methods: [baseline], seeds: [1], "
                                       "target_val_loss: 0.001, max_epochs: 1}\n";
  r = run("experiment --config " + (s.dir / "exp.yaml").string() + " --out " + exp_out.string());
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("report.md") && Catch::Contains("--force"));
  CHECK(size_of(exp_out / "report.md") == std::string("an earlier report\n").size());

  // A run folder, a generated file or a coarse copy where nothing can be
  // written: refused before the data are loaded (a bare file-system error
  // after training had started, or after generating; session 59).
  for (const std::string& cmd :
       std::vector<std::string>{"train --config " + cfg + " --out /proc/mrmf_run",
                                "experiment --config " + (s.dir / "exp.yaml").string() + " --out /proc/mrmf_exp",
                                "datagen neuron-inverter --train 2 --val 2 --test 2 --out /proc/mrmf/ni.h5",
                                "datagen cosmoflow --size 16 --train 2 --val 2 --test 2 --out /proc/mrmf_cf",
                                "downsample --in " + data + " --factor 2 --out /proc/mrmf/ni.h5"}) {
    r = run(cmd);
    INFO(cmd << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("cannot write in /proc ("));
  }
  r = run("datagen neuron-inverter --train 2 --val 2 --test 2 --out " + data + "/ni.h5");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(data + " is a file, so the folder cannot be made"));
  CHECK(size_of(data) == data_size);
}

TEST_CASE("cli: a disk that fills up while writing keeps the earlier file and exits 1 without a crash", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string(), out = (s.dir / "coarse.h5").string();
  make_tiny_ni(data, " --train 256 --val 64 --test 64 --seed 1 --time-bins 64");
  REQUIRE(run("downsample --in " + data + " --out " + out + " --factor 2").code == 0);
  const std::string before = slurp(out);
  // `ulimit -f` stands in for a full disk (writes past it fail with EFBIG):
  // cut at several points of the file, some inside the data and some in
  // the metadata HDF5 writes only when the file is closed. Each must fail
  // (exit 1, not HDF5 1.10's crash at exit after a failed close) and leave
  // the file it would have replaced as it was. UCX_TLS keeps MPI's start-up
  // off shared-memory files, which the limit would also stop.
  for (const double part : {0.3, 0.7, 0.95, 0.995}) {
    const long kib = static_cast<long>(part * static_cast<double>(before.size()) / 1024);
    INFO("limit " << kib << " KiB of " << before.size() << " bytes");
    const Result r = run_prefixed(
        "UCX_TLS=self,tcp bash -c 'trap \"\" XFSZ; ulimit -f " + std::to_string(kib) + "; exec \"$0\" \"$@\"' ",
        "downsample --in " + data + " --out " + out + " --factor 2 --force");
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(slurp(out) == before);
  }
  int temps = 0;
  for (const auto& e : fs::directory_iterator(s.dir)) temps += e.path().string().find(".tmp.") != std::string::npos;
  CHECK(temps == 0);
  // A data set that cannot fit where it goes is refused before it is generated.
  for (const std::string& what : {"neuron-inverter --out " + (s.dir / "huge.h5").string() + " --time-bins 8",
                                  "cosmoflow --out " + (s.dir / "huge_cf").string() + " --size 512"}) {
    const Result r = run("datagen " + what + " --train 999999999999 --val 1 --test 1");
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("GB free"));
  }
  CHECK_FALSE(fs::exists(s.dir / "huge.h5"));
}

TEST_CASE(
    "cli: every stage an experiment plans is checked before the first trains, and a failing --force keeps the report",
    "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [baseline]\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n");
  const fs::path out = s.dir / "exp";
  const std::string base = "experiment --config " + exp.string() + " --out " + out.string();
  REQUIRE(run(base).code == 0);
  const std::string report = slurp(out / "report.md");
  // Each of these fails in a later stage than the first: found before the
  // baseline trains (no epoch is logged) and before the report is replaced.
  const std::vector<std::pair<std::string, std::string>> cases = {
      // the coarse rung's batch empties its shard (128 samples)
      {"--set 'experiment.resolution_overrides={\"2\": [train.batch_size=256]}'",
       "stage mrmf1/stage1/coarse@2 (1 rank(s)) cannot run"},
      // the coarse rung's model does not fuse with the dense one
      {"--set 'experiment.resolution_overrides={\"2\": [\"model.options.conv_channels=4,8,8\"]}'",
       "the fusion of mrmf1/stage1/"},
      // a checkpoint for another resolution to start the dense model from
      {"--set 'experiment.resolution_overrides={\"2\": [train.init=" + (s.dir / "nothing.h5").string() + "]}'",
       "nothing.h5"},
      // the reduction on a device this run does not have
      {"--set 'experiment.resolution_overrides={\"2\": [data.reduce_on=device]}'", "needs a CUDA device"},
  };
  for (const auto& [set, needle] : cases) {
    const Result r = run(base + " --force --methods baseline mrmf1 " + set);
    INFO(set << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains(needle) && !Catch::Contains("epoch   0"));
    CHECK(slurp(out / "report.md") == report);
  }
  // The run configuration's runtime.device applies to experiments as to `train`.
  const Result r = run(base + " --force --set runtime.device=cuda:99");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("cuda"));
}

TEST_CASE("cli: a train --force that fails before its first checkpoint puts the earlier run back", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const TrainedRun t = trained_run(s);
  const std::string &data = t.data, &cfg = t.cfg, &out = t.out;
  const std::string ck = slurp(fs::path(out) / "checkpoint.h5"), metrics = slurp(fs::path(out) / "metrics.jsonl");
  // A learning rate that diverges at once: the run stops at step 1, without a checkpoint.
  Result r = run("train --config " + cfg + " --out " + out + " --force --set optimizer.lr=1e30");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("non-finite") && Catch::Contains("restored"));
  CHECK(slurp(fs::path(out) / "checkpoint.h5") == ck);
  CHECK(slurp(fs::path(out) / "metrics.jsonl") == metrics);
  CHECK_FALSE(fs::exists(fs::path(out) / "previous_run"));
  // A --force run that finishes replaces the earlier one and leaves nothing aside.
  REQUIRE(run("train --config " + cfg + " --out " + out + " --force --set stop.max_epochs=1 --set train.seed=2").code ==
          0);
  CHECK(slurp(fs::path(out) / "checkpoint.h5") != ck);
  CHECK_FALSE(fs::exists(fs::path(out) / "previous_run"));

  // A --force run killed before its first epoch (a crash, a time limit): the earlier run waits in previous_run/,
  // and the next --force keeps it there rather than the killed attempt's leftovers -- here that one fails too,
  // and the earlier run comes back.
  const std::string ck2 = slurp(fs::path(out) / "checkpoint.h5");
  r = run_prefixed("MRMF_FAULT_EXIT=0:1 ", "train --config " + cfg + " --out " + out + " --force --set train.seed=3");
  CHECK(r.code != 0);
  CHECK(slurp(fs::path(out) / "previous_run" / "checkpoint.h5") == ck2);
  r = run("train --config " + cfg + " --out " + out + " --force --set optimizer.lr=1e30");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("holds the run an earlier --force set aside"));
  CHECK(slurp(fs::path(out) / "checkpoint.h5") == ck2);
  CHECK_FALSE(fs::exists(fs::path(out) / "previous_run"));

  // --resume and --force together; --resume with metrics but no checkpoint (it would start over).
  r = run("train --config " + cfg + " --out " + out + " --resume --force");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("contradict each other"));
  fs::remove(fs::path(out) / "checkpoint.h5");
  const std::string kept = slurp(fs::path(out) / "metrics.jsonl");
  r = run("train --config " + cfg + " --out " + out + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("no checkpoint.h5 to continue from"));
  CHECK(slurp(fs::path(out) / "metrics.jsonl") == kept);

  // --resume where metrics.jsonl lost its lines: the checkpoint's epoch count is the run's.
  const std::string r4 = (s.dir / "r4").string();
  REQUIRE(run("train --config " + cfg + " --out " + r4 + " --set stop.max_epochs=2").code == 0);
  fs::remove(fs::path(r4) / "metrics.jsonl");
  r = run("train --config " + cfg + " --out " + r4 + " --set stop.max_epochs=3 --resume");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("holds 0 readable record(s) of the 2 epoch(s)"));
  CHECK(nlohmann::json::parse(std::ifstream(fs::path(r4) / "summary.json"))["epochs"] == 3);

  // A run that died in its first epoch left an empty metrics.jsonl and no checkpoint: --resume starts it over.
  const std::string r5 = (s.dir / "r5").string();
  CHECK(run_prefixed("MRMF_FAULT_EXIT=0:1 ", "train --config " + cfg + " --out " + r5).code != 0);
  r = run("train --config " + cfg + " --out " + r5 + " --set stop.max_epochs=1 --resume");
  INFO(r.out);
  CHECK(r.code == 0);

  // An output that is no regular file is refused, --force or not; a thread count that would crash is a usage error.
  fs::create_directories(s.dir / "a_folder");
  r = run("train --config " + cfg + " --out " + (s.dir / "t2").string() + " --set stop.max_epochs=1");
  REQUIRE(r.code == 0);
  r = run("predict --checkpoint " + (s.dir / "t2" / "checkpoint.h5").string() + " --data " + data + " --out " +
          (s.dir / "a_folder").string() + " --force");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("is a folder; the output must be a file"));
  r = run("train --config " + cfg + " --out " + (s.dir / "t3").string() + " --threads 100000");
  CHECK(r.code == 2);
}

TEST_CASE("cli: SIGTERM (a job's time limit) stops training with a checkpoint that --resume continues exactly",
          "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni_sig.h5").string();  // tiny_experiment below makes ni.h5
  make_tiny_ni(data, " --train 128 --val 32 --test 32 --seed 1 --time-bins 64");
  const std::string cfg = write_config(s.dir, data);
  const auto final_loss = [](const fs::path& dir) {
    return nlohmann::json::parse(std::ifstream(dir / "summary.json"))["final_val_loss"].get<double>();
  };
  const fs::path whole = s.dir / "whole", cut = s.dir / "cut";
  REQUIRE(run("train --config " + cfg + " --out " + whole.string() + " --set stop.max_epochs=3").code == 0);
  // MRMF_FAULT_SIGNAL=0:S raises SIGTERM when S steps are done; the step
  // that follows carries it in its loss all-reduce and is the last. Steps 6
  // and 8 of 4 per epoch: inside the second epoch (a step checkpoint), and
  // its last step (the epoch's own checkpoint).
  for (const char* at : {"0:5", "0:7"}) {
    INFO("signal at " << at);
    fs::remove_all(cut);
    Result r = run_prefixed(std::string("MRMF_FAULT_SIGNAL=") + at + " ",
                            "train --config " + cfg + " --out " + cut.string() + " --set stop.max_epochs=3");
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains("stopped by SIGTERM") &&
                          Catch::Contains("with --resume (in place of --force) continues"));
    REQUIRE(fs::exists(cut / "checkpoint.h5"));
    r = run("train --config " + cfg + " --out " + cut.string() + " --set stop.max_epochs=3 --resume");
    INFO(r.out);
    REQUIRE(r.code == 0);
    // Resumed where it stopped (a fresh start would give the same numbers):
    // inside epoch 1 after 2 of its 4 batches, or at epoch 2's start.
    CHECK_THAT(r.out,
               Catch::Contains(std::string(at) == "0:5" ? "at epoch 1, batch 2 (step 6)" : "at epoch 2 (step 8)"));
    CHECK(final_loss(cut) == final_loss(whole));  // bit for bit (deterministic CPU run)
    // ... every epoch's losses too, the interrupted epoch's included.
    const auto losses = [](const fs::path& dir) {
      std::vector<std::pair<double, double>> v;
      std::ifstream in(dir / "metrics.jsonl");
      for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line);
        v.emplace_back(j["train_loss"].get<double>(), j["val_loss"].get<double>());
      }
      return v;
    };
    CHECK(losses(cut).size() == 3);
    CHECK(losses(cut) == losses(whole));
  }
  // A command that does not train keeps the default: SIGTERM ends it at once (status 128 + 15).
  {
    const std::string cmd = "OMP_NUM_THREADS=1 MRMF_DEVICE=cpu " + mrmf_bin() + " datagen neuron-inverter --out " +
                            (s.dir / "big.h5").string() +
                            " --train 200000 --val 8 --test 8 > /dev/null 2>&1 & "
                            "pid=$!; sleep 1; kill -TERM $pid; wait $pid; echo status=$?";
    FILE* p = ::popen(("bash -c '" + cmd + "'").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[256] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
    ::pclose(p);
    CHECK_THAT(std::string(buf, n), Catch::Contains("status=143"));
  }
  // Inside an experiment: the stage stops with its checkpoint, and --resume finishes the experiment.
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [mrmf1]\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 2}\n"
                                       "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n");
  const std::string base = "experiment --config " + exp.string() + " --out " + (s.dir / "exp").string();
  Result r = run_prefixed("MRMF_FAULT_SIGNAL=0:3 ", base);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("stopped by SIGTERM"));
  r = run(base + " --resume");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("resumed from"));
}

TEST_CASE(
    "cli: --resume checks the data and the epoch it stopped in, and --force never trades a finished run for an "
    "unfinished one",
    "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 128 --val 32 --test 32 --seed 1 --time-bins 64");  // 4 steps an epoch
  const std::string cfg = write_config(s.dir, data);
  const fs::path out = s.dir / "run";
  const std::string train = "train --config " + cfg + " --out " + out.string();
  const auto summary = [&] { return slurp(out / "summary.json"); };
  REQUIRE(run(train + " --set stop.max_epochs=1").code == 0);  // run A, finished
  const std::string a = summary();

  // A SIGTERM inside epoch 2 (after 2 of its 4 steps): a mid-epoch checkpoint.
  // --resume with a guard it does not reach would be "done" with the
  // weights of a partial epoch: refused, nothing changed.
  Result r = run_prefixed("MRMF_FAULT_SIGNAL=0:5 ", train + " --set stop.max_epochs=3 --force");  // attempt B
  INFO(r.out);
  REQUIRE(r.code == 1);
  REQUIRE(fs::exists(out / "checkpoint.h5"));
  CHECK(slurp(out / "previous_run" / "summary.json") == a);
  r = run(train + " --set stop.max_epochs=1 --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("was written inside epoch 2 (after its batch 2)") &&
                        Catch::Contains("Give stop.max_epochs at least 2"));

  // --force --init <out>/checkpoint.h5 again after the interrupted attempt
  // would start from the attempt's checkpoint: refused, naming the earlier one.
  r = run(train + " --force --init " + (out / "checkpoint.h5").string());
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("is the checkpoint of an interrupted --force attempt") &&
                        Catch::Contains((out / "previous_run" / "checkpoint.h5").string()));

  // --force C failing at its first step: finished run A comes back (it was
  // deleted, and attempt B's files kept, because B had a checkpoint).
  r = run(train + " --set stop.max_epochs=1 --force --set optimizer.lr=1e30");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(summary() == a);
  CHECK(!fs::exists(out / "previous_run"));

  // The data regenerated under the same path: --resume refused (it trained on the new data).
  make_tiny_ni(data, " --train 128 --val 32 --test 32 --seed 2 --time-bins 64 --force");
  r = run(train + " --set stop.max_epochs=2 --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--resume: the data (" + data) && Catch::Contains("are not those"));
  CHECK(summary() == a);

  // A run started with --init resumes after that checkpoint is gone; its
  // summary.json goes when the resume starts (it is written at the end).
  const fs::path init_src = s.dir / "src.h5", with_init = s.dir / "with_init";
  fs::copy_file(out / "checkpoint.h5", init_src);
  const std::string t2 = "train --config " + cfg + " --out " + with_init.string() + " --init " + init_src.string();
  REQUIRE(run(t2 + " --set stop.max_epochs=1").code == 0);
  fs::remove(init_src);
  r = run_prefixed("MRMF_FAULT_SIGNAL=0:5 ", t2 + " --set stop.max_epochs=3 --resume");  // global steps
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(!fs::exists(with_init / "summary.json"));  // its 1 epoch would contradict the checkpoint's 2
  r = run(t2 + " --set stop.max_epochs=3 --resume");
  CHECK(r.code == 0);
  CHECK(nlohmann::json::parse(slurp(with_init / "summary.json"))["epochs"] == 3);
  // Without a checkpoint of its own, a missing --init is a usage error (exit 2), not a data error.
  r = run("train --config " + cfg + " --out " + (s.dir / "fresh").string() + " --init " + init_src.string());
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("src.h5: no such file"));
  // A FIFO where the run's metrics.jsonl belongs: refused (opening it blocked, a hang).
  const fs::path fifo = s.dir / "fifo";
  fs::create_directories(fifo);
  fs::copy_file(with_init / "checkpoint.h5", fifo / "checkpoint.h5");
  REQUIRE(::mkfifo((fifo / "metrics.jsonl").c_str(), 0600) == 0);
  r = run("train --config " + cfg + " --out " + fifo.string() + " --resume --set stop.max_epochs=4");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("metrics.jsonl is not a regular file"));

  // A --force killed while it moved a run aside (files in .previous_run.new):
  // a plain train is refused (it would have started over on top of them),
  // --resume moves them back and continues.
  const fs::path st = s.dir / "staged";
  const std::string t3 = "train --config " + cfg + " --out " + st.string();
  REQUIRE(run(t3 + " --set stop.max_epochs=1").code == 0);
  fs::create_directories(st / ".previous_run.new");
  for (const char* f : {"checkpoint.h5", "metrics.jsonl"}) fs::rename(st / f, st / ".previous_run.new" / f);
  r = run(t3 + " --set stop.max_epochs=1");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("already holds results") && Catch::Contains(".previous_run.new"));
  r = run(t3 + " --set stop.max_epochs=2 --resume");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("resumed from") && Catch::Contains("at epoch 1"));
  CHECK(!fs::exists(st / ".previous_run.new"));
  // An attempt a --force started, killed and then finished with --resume
  // replaces the run set aside: previous_run goes (else the next --force
  // kept the older run and dropped this finished one).
  REQUIRE(run_prefixed("MRMF_FAULT_SIGNAL=0:5 ", t3 + " --set stop.max_epochs=3 --force").code == 1);
  REQUIRE(fs::exists(st / "previous_run" / "summary.json"));
  r = run(t3 + " --set stop.max_epochs=3 --resume");
  CHECK(r.code == 0);
  CHECK(!fs::exists(st / "previous_run"));
}
