// The `mrmf` command as a user runs it: exit codes (0 ok, 2 usage or
// configuration, 1 runtime/data), messages that name what is wrong, and a
// train -> eval -> predict round trip on a tiny generated file.
//
// The binary is $MRMF_BIN, or <build>/bin/mrmf next to this test's build
// folder (<build>/tests/mrmf_unit_tests, found through /proc/self/exe). When
// neither exists the cases are skipped with a warning (e.g. a build of the
// tests alone).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "data/formats.h"
#include "data/h5file.h"

using namespace mrmf;
namespace fs = std::filesystem;

namespace {

std::string mrmf_bin() {
  if (const char* e = std::getenv("MRMF_BIN")) return e;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
    if (fs::exists(d / "bin" / "mrmf")) return (d / "bin" / "mrmf").string();
  return "";
}

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs the binary with a shell command tail; stderr is captured with stdout.
Result run_prefixed(const std::string& launcher, const std::string& args) {
  Result r;
  const std::string cmd = "OMP_NUM_THREADS=1 MRMF_DEVICE=cpu " + launcher + mrmf_bin() + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}
Result run(const std::string& args) { return run_prefixed("", args); }
// stdout alone (stderr discarded): for machine-readable output.
Result run_stdout(const std::string& args) { return run_prefixed("", args + " 2>/dev/null #"); }

#define SKIP_WITHOUT_BINARY()                                              \
  if (mrmf_bin().empty()) {                                                \
    WARN("mrmf binary not found (set MRMF_BIN): skipping the CLI checks"); \
    return;                                                                \
  }

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("mrmf_cli_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// A run config for the tiny file: a small model so that training takes a second.
std::string write_config(const fs::path& dir, const std::string& data) {
  const fs::path p = dir / "tiny.yaml";
  std::ofstream(p) << "model:\n  name: neuron_inverter\n"
                      "  options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32'}\n"
                      "data: {format: neuron_inverter, path: '"
                   << data
                   << "'}\n"
                      "train: {batch_size: 32, seed: 1}\n"
                      "optimizer: {name: adam, lr: 2.0e-3}\n"
                      "stop: {max_epochs: 2}\n"
                      "runtime: {device: cpu}\n";
  return p.string();
}

// A tiny Neuron Inverter file (T = 64, `train` samples), the tiny run config
// on it, and an experiment config (one seed, target 0.001, 1 final epoch,
// ladder [[2], [1]]) with `body` added to its experiment section.
std::string slurp(const fs::path& p) {
  std::stringstream ss;
  ss << std::ifstream(p).rdbuf();
  return ss.str();
}

// A small synthetic Neuron Inverter file at `path` (`args`: sizes, T, seed).
void make_tiny_ni(const std::string& path, const std::string& args) {
  const Result r = run("datagen neuron-inverter --out " + path + args);
  INFO(r.out);
  REQUIRE(r.code == 0);
}

fs::path tiny_experiment(const Scratch& s, int train, const std::string& body) {
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train " + std::to_string(train) + " --val 64 --test 64 --time-bins 64 --seed 3");
  write_config(s.dir, data);
  const fs::path exp = s.dir / "exp.yaml";
  std::ofstream(exp) << "base: tiny.yaml\nexperiment:\n  seeds: [1]\n  target_val_loss: 0.001\n  max_epochs: 1\n"
                        "  ladder: [[2], [1]]\n"
                     << body;
  return exp;
}

// `mrmf X --help` exits 0 even for an unknown X (CLI11 shows the main help),
// so look for X in the list of subcommands instead.
bool has_command(const std::string& name) {
  const Result r = run("--help");
  return r.code == 0 && r.out.find("\n  " + name + " ") != std::string::npos;
}
}  // namespace

TEST_CASE("cli: usage and configuration errors exit 2 and name the problem", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string cfg = write_config(s.dir, (s.dir / "none.h5").string());
  const std::string out = (s.dir / "run").string();

  Result r = run("frobnicate");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("unknown command 'frobnicate'") && Catch::Contains("experiment"));

  r = run("");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("subcommand is required"));

  r = run("train --config " + cfg + " --out " + out + " --bogus-flag");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--bogus-flag"));

  r = run("train --config " + cfg + " --out " + out + " --set train.epoch=5");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("train.epoch") && Catch::Contains("did you mean"));

  r = run("train --config " + cfg + " --out " + out + " --set train.batch_size=0");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("train.batch_size") && Catch::Contains("at least 1"));

  r = run("train --config " + (s.dir / "missing.yaml").string() + " --out " + out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("missing.yaml"));
}

TEST_CASE("cli: every subcommand answers --help, and bench times a training step", "[cli]") {
  SKIP_WITHOUT_BINARY();
  for (const char* c : {"info", "datagen", "downsample", "train", "experiment", "eval", "predict", "bench"}) {
    INFO(c);
    CHECK(has_command(c));
    const Result r = run(std::string(c) + " --help");
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("Usage:") && Catch::Contains(c));
  }
  Result r = run("bench --workload ni400 --workload cf16 --batch 2 --steps 2 --warmup 1 --json");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\"workload\": \"ni400\"") && Catch::Contains("\"workload\": \"cf16\"") &&
                        Catch::Contains("\"batch\": 2") && Catch::Contains("samples_per_s"));
  r = run("bench --workload resnet50");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("unknown workload 'resnet50'") && Catch::Contains("ni<T>"));
  r = run("bench --workload ni400 --steps 0");
  CHECK(r.code == 2);
  // An input too small for the model: named before anything is timed.
  // --json: stdout is exactly one JSON document, whatever is logged (the
  // device notice of --device auto goes to stderr).
  r = run_stdout("bench --workload ni400 --batch 2 --steps 1 --warmup 0 --json --device auto");
  CHECK(r.code == 0);
  CHECK_NOTHROW(nlohmann::json::parse(r.out));
  r = run("bench --workload ni400 --workload ni64 --json");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("T = 64 is too short"));
  CHECK_THAT(r.out, !Catch::Contains("results"));
}

TEST_CASE("cli: a resolution or transform that does not fit the data is a config error before any reading", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 64 --val 32 --test 32 --seed 1 --time-bins 100");
  const std::string cfg = write_config(s.dir, data);
  Result r = run("train --config " + cfg + " --out " + (s.dir / "r1").string() + " --set data.reduce=[3]");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("data.reduce") && Catch::Contains("does not divide"));
  r = run("train --config " + cfg + " --out " + (s.dir / "r2").string() +
          " --set data.transform=scale --set data.scale=[1,2]");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("'data.scale': 2 factor(s) for data with 3 channels"));
  // log1p of z-scored Neuron Inverter frames is NaN: refused as a config error.
  r = run("train --config " + cfg + " --out " + (s.dir / "r3").string() + " --set data.transform=log1p");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("data.transform") && Catch::Contains("z-scored"));
  // Model options: a YAML list means the comma list; a map is named.
  r = run("train --config " + cfg + " --out " + (s.dir / "r4").string() +
          " --set model.options.conv_channels=[8,8,8] --set stop.max_epochs=1");
  CHECK(r.code == 0);
  r = run("train --config " + cfg + " --out " + (s.dir / "r5").string() + " --set 'model.options.fc={a: 1}'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("model.options.fc") && Catch::Contains("a map"));
  // A flag's lower bound is stated as such.
  r = run("bench --batch 0");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--batch") && Catch::Contains("must be at least 1, got 0"));
}

TEST_CASE("cli: results already written are not replaced without --force, inputs never", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 64 --val 32 --test 32 --seed 1 --time-bins 64");
  const std::string cfg = write_config(s.dir, data), out = (s.dir / "run").string();
  REQUIRE(run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=1").code == 0);
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

  // train --force with --init from the run it replaces: the checkpoint is read before it goes.
  r = run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=1 --force --init " + ck.string());
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("initialized"));

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
}

TEST_CASE("cli: bad data files end the run with exit 1, naming file and dataset", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  using namespace mrmf::data;
  auto ni_file = [&](const std::string& name, float bad_frame, float bad_label, int64_t labels_n) {
    const std::string p = (s.dir / name).string();
    H5File f = H5File::create(p);
    for (const char* split : {"train", "val"}) {
      Tensor fr = Tensor::full({64, 64, 3}, 0.5f), lb = Tensor::full({labels_n, 19}, 0.1f);
      if (std::string(split) == "train" && bad_frame != 0) fr.data<float>()[100] = bad_frame;
      if (std::string(split) == "val" && bad_label != 0) lb.data<float>()[7] = bad_label;
      f.write(std::string(split) + "_frames", fr);
      f.write(std::string(split) + "_unitStar_par", lb);
    }
    return p;
  };
  struct Case {
    std::string file, dataset, what;
  };
  std::vector<Case> cases = {
      {ni_file("nan_frames.h5", std::nanf(""), 0, 64), "'train_frames'", "non-finite"},
      {ni_file("inf_labels.h5", 0, INFINITY, 64), "'val_unitStar_par'", "non-finite"},
      {ni_file("short_labels.h5", 0, 0, 60), "'train_unitStar_par'", "60 labels"},
  };
  {  // truncated: the first half of a good file
    const std::string good = ni_file("good.h5", 0, 0, 64), cut = (s.dir / "truncated.h5").string();
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    cases.push_back({cut, "", "truncated or corrupt"});
  }
  for (const Case& c : cases) {
    INFO(c.file);
    const Result r = run("train --config " + write_config(s.dir, c.file) + " --out " + (s.dir / "run").string());
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains(c.file) && Catch::Contains(c.dataset) && Catch::Contains(c.what));
    CHECK_THAT(r.out, !Catch::Contains("Segmentation") && !Catch::Contains("terminate called"));
  }
  // The offline reducer refuses the same bad frames (and writes nothing).
  const Result r = run("downsample --in " + cases[0].file + " --out " + (s.dir / "coarse.h5").string() +
                       " --factor 2 --axes t");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("nan_frames.h5") && Catch::Contains("'train_frames'"));
  CHECK_FALSE(fs::exists(s.dir / "coarse.h5"));
}

TEST_CASE("cli: a missing data file exits 1 and names the file", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "no_such_ni.h5").string();
  const Result r = run("train --config " + write_config(s.dir, data) + " --out " + (s.dir / "run").string());
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("no_such_ni.h5"));
}

TEST_CASE("cli: train, eval and predict round trip on a tiny file", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  // 70 test samples: not a multiple of the batch, so predict must handle the tail.
  make_tiny_ni(data, " --train 256 --val 64 --test 70 --time-bins 64 --seed 3");
  Result r;
  const std::string cfg = write_config(s.dir, data), out = (s.dir / "run").string();
  r = run("train --config " + cfg + " --out " + out);
  INFO(r.out);
  REQUIRE(r.code == 0);
  for (const char* f : {"metrics.jsonl", "summary.json", "checkpoint.h5"}) CHECK(fs::exists(fs::path(out) / f));
  const auto summary = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  CHECK(summary["epochs"] == 2);
  CHECK(summary["stop_reason"] == "max_epochs");
  CHECK(summary["resumed"] == false);
  const std::string ck = (fs::path(out) / "checkpoint.h5").string();
  {  // --resume to 3 epochs (through the issue's own spelling, train.epochs): the summary covers the whole run
    const std::string out2 = (s.dir / "run_resumed").string();
    REQUIRE(run("train --config " + cfg + " --out " + out2 + " --set train.epochs=1").code == 0);
    r = run("train --config " + cfg + " --out " + out2 + " --set train.epochs=3 --resume");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("resumed from"));
    const auto s2 = nlohmann::json::parse(std::ifstream(fs::path(out2) / "summary.json"));
    CHECK(s2["epochs"] == 3);
    CHECK(s2["epochs_this_process"] == 2);
    CHECK(s2["resumed"] == true);
    double t = 0;
    std::ifstream m(fs::path(out2) / "metrics.jsonl");
    for (std::string line; std::getline(m, line);) t += nlohmann::json::parse(line)["epoch_s"].get<double>();
    CHECK(s2["train_time_s"].get<double>() == Approx(t));
  }

  if (!has_command("eval") || !has_command("predict")) {
    WARN("this mrmf has no eval/predict subcommand: skipping that part");
    return;
  }
  // eval on the validation split reproduces the trainer's last validation loss
  // (64 samples = 2 full batches: the same samples).
  r = run("eval --checkpoint " + ck + " --data " + data + " --split val --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["samples"] == 64);
  CHECK(j["targets"] == 19);
  CHECK(j["mse_per_target"].size() == 19);
  CHECK(j["mse"].get<double>() == Approx(summary["final_val_loss"].get<double>()).epsilon(1e-4));

  // predict on the test split: every one of the 70 samples, labels in file order.
  const std::string pred = (s.dir / "pred.h5").string();
  r = run("predict --checkpoint " + ck + " --data " + data + " --split test --batch 32 --out " + pred);
  INFO(r.out);
  REQUIRE(r.code == 0);
  {
    data::H5File h = data::H5File::open_read(pred);
    CHECK(h.shape("predictions") == std::vector<int64_t>{70, 19});
    CHECK(h.shape("labels") == std::vector<int64_t>{70, 19});
    CHECK(h.dtype("predictions") == DType::F32);
    CHECK(h.read_string_attribute("/", "checkpoint").value_or("") == ck);
    CHECK_THAT(h.read_string_attribute("/", "model").value_or(""), Catch::Contains("neuron_inverter"));
    const Tensor want = data::NeuronInverterFile::open(data).read(data::Split::Test, 0, 70).labels;
    const Tensor got = h.read("labels");
    CHECK(std::memcmp(want.raw_data(), got.raw_data(), want.nbytes()) == 0);
  }

  // Under mpiexec every rank evaluates its contiguous part and rank 0 writes
  // the same file (up to float rounding: other batch compositions).
  if (std::system("command -v mpiexec > /dev/null 2>&1") == 0) {
    const std::string pred2 = (s.dir / "pred2.h5").string();
    r = run_prefixed("mpiexec -n 2 ", "predict --checkpoint " + ck + " --data " + data +
                                          " --split test --batch 16 --out " + pred2);
    INFO(r.out);
    REQUIRE(r.code == 0);
    const Tensor a = data::H5File::open_read(pred).read("predictions");
    const Tensor b = data::H5File::open_read(pred2).read("predictions");
    REQUIRE(b.numel() == a.numel());
    double worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(a.data<float>()[i] - b.data<float>()[i])));
    CHECK(worst < 1e-5);
  } else {
    WARN("no mpiexec: the 2-rank predict check is skipped");
  }

  // The data's resolution must match the checkpoint's input: a clear error.
  r = run("eval --checkpoint " + ck + " --data " + data + " --reduce 2");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("[3, 32]") && Catch::Contains("[3, 64]") && Catch::Contains("--reduce 1"));
  // A model key for eval: the model is the checkpoint's, so refused rather than ignored.
  r = run("eval --checkpoint " + ck + " --data " + data + " --set model.name=cosmoflow");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("model.name=cosmoflow") && Catch::Contains("comes from the checkpoint"));
  // A missing data file for eval: exit 1, named.
  r = run("eval --checkpoint " + ck + " --data " + (s.dir / "gone.h5").string());
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("gone.h5"));
}

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
  CHECK_THAT(slurp(fs::path(out) / "report.md"), Catch::Contains("Partial: 1 of 2 runs finished") &&
                                                     Catch::Contains("--resume"));

  // Refused: --resume with --force; --resume with a key that changes what the
  // runs compute (named, old -> new); a plain re-run. The saved state stays.
  const std::string base = "experiment --config " + exp.string() + " --out " + out;
  const std::string state = slurp(fs::path(out) / "experiment_state.json");
  r = run(base + " --resume --force");
  CHECK(r.code == 2);
  r = run(base + " --resume --set experiment.target_val_loss=0.002 --set train.batch_size=16");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("another configuration") && Catch::Contains("experiment.target_val_loss: 0.001 -> 0.002") &&
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
  // Seed 2's baseline is added by this command: it starts clean, although
  // its folder holds the finished checkpoint of the experiment --force
  // replaced (that one must not be "resumed").
  REQUIRE(fs::exists(fs::path(out) / "baseline/seed2/baseline/checkpoint.h5"));
  r = run(base + " --resume --methods baseline --set experiment.seeds=[1,2]");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_FALSE(Catch::Contains("seed2/baseline/checkpoint.h5").match(r.out));
  const auto j4 = nlohmann::json::parse(std::ifstream(fs::path(out) / "summary.json"));
  CHECK(j4["runs"].size() == 3);
  CHECK(j4["partial"] == false);
  CHECK_THAT(slurp(fs::path(out) / "report.md"), Catch::Contains("# resumed (--resume) with:") &&
                                                     Catch::Contains("experiment.methods=[baseline]"));
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

TEST_CASE("cli: train --init-groups resample starts from a checkpoint at another resolution", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 64 --val 32 --test 32 --time-bins 64 --seed 3");
  Result r;
  const std::string base = "train --config " + write_config(s.dir, data) + " --set stop.max_epochs=1 --out ";
  r = run(base + (s.dir / "coarse").string() + " --set data.reduce=[2]");
  REQUIRE(r.code == 0);
  const std::string ck = (s.dir / "coarse" / "checkpoint.h5").string();
  // A whole-model init needs the same input shape ...
  r = run(base + (s.dir / "all").string() + " --init " + ck);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("[3, 32]") && Catch::Contains("[3, 64]") &&
                        Catch::Contains("train.init_groups: resample"));
  // ... resample takes it at another resolution: with the bottom frozen, the
  // trained run's convolutions are still the coarse checkpoint's.
  const fs::path out = s.dir / "resampled";
  r = run(base + out.string() + " --init " + ck + " --init-groups resample --freeze bottom");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("(its top resampled to this resolution)"));
  const auto conv = [](const std::string& file) {
    return data::H5File::open_read(file).read("model/cnn_block.0.weight");
  };
  const Tensor a = conv(ck), b = conv((out / "checkpoint.h5").string());
  REQUIRE(a.numel() == b.numel());
  CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
  // An unknown group is a configuration error that lists the choices.
  r = run(base + (s.dir / "bad").string() + " --init " + ck + " --init-groups interpolate");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("resample"));
}

TEST_CASE("cli: train says which stop rule ended it", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 64 --val 32 --test 32 --time-bins 64 --seed 3");
  Result r;
  const std::string base = "train --config " + write_config(s.dir, data) + " --out ";
  // Any validation loss is under 100: the target ends the first epoch.
  r = run(base + (s.dir / "target").string() + " --set stop.target_val_loss=100 --set stop.max_epochs=3");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("reached the target validation loss 100 in epoch 0 (0."));
  CHECK_FALSE(Catch::Contains("epoch   1").match(r.out));
  // Every reduction is under 100: the rule counts epochs 1 and 2 (epoch 0
  // has no reduction) and fires after epoch 2, before the guard.
  r = run(base + (s.dir / "plateau").string() +
          " --set stop.max_epochs=5 --set stop.plateau_threshold=100 --set stop.plateau_patience=2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("stopped by its plateau rule after epoch 2: the training loss fell by less than "
                                    "100 in 2 epoch(s) in a row"));
  CHECK_FALSE(Catch::Contains("epoch   3").match(r.out));
  CHECK_FALSE(Catch::Contains("reached the target").match(r.out));
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
  std::ifstream svg_in(out / "chart.svg");
  const std::string svg((std::istreambuf_iterator<char>(svg_in)), std::istreambuf_iterator<char>());
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
    for (const auto& st : run["stages"]) epochs_at[std::stoi(st["resolution"].get<std::string>())] += st["epochs"].get<int64_t>();
  CHECK(j["per_resolution"]["1"]["epochs"] == epochs_at[1]);
  CHECK(j["per_resolution"]["2"]["epochs"] == epochs_at[2]);
  for (const char* k : {"io_s", "compute_s", "comm_s", "comm_in_flight_s", "val_s", "epoch_s", "samples_per_s"})
    CHECK(j["per_resolution"]["1"][k].get<double>() >= 0);
  const auto& m1 = j["methods"]["mrmf1"];
  CHECK(m1["stages"].size() == 3);
  CHECK(m1["stages"][0]["epochs"]["mean"] == j["runs"][0]["stages"][0]["epochs"]);
  CHECK(m1["epochs_after_fusion"]["mean"] == j["runs"][0]["epochs_after_fusion"]);
  CHECK(m1.contains("fusion_s"));
  std::ifstream md_in(out / "report.md");
  const std::string md((std::istreambuf_iterator<char>(md_in)), std::istreambuf_iterator<char>());
  CHECK_THAT(md, Catch::Contains("## Time per stage") && Catch::Contains("## Per-epoch breakdown per resolution") &&
                     Catch::Contains("Improvement over MRT"));
}

TEST_CASE("cli: a disk that fills up while writing keeps the earlier file and exits 1 without a crash", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const std::string data = (s.dir / "ni.h5").string(), out = (s.dir / "coarse.h5").string();
  make_tiny_ni(data, " --train 256 --val 64 --test 64 --seed 1 --time-bins 64");
  REQUIRE(run("downsample --in " + data + " --out " + out + " --factor 2").code == 0);
  std::ifstream in(out, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
    std::ifstream again(out, std::ios::binary);
    CHECK(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()) == before);
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
  std::ifstream rep_in(out / "report.md");
  const std::string report((std::istreambuf_iterator<char>(rep_in)), std::istreambuf_iterator<char>());
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
    std::ifstream again(out / "report.md");
    CHECK(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()) == report);
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
  const std::string data = (s.dir / "ni.h5").string();
  make_tiny_ni(data, " --train 64 --val 32 --test 32 --seed 1 --time-bins 64");
  const std::string cfg = write_config(s.dir, data), out = (s.dir / "run").string();
  REQUIRE(run("train --config " + cfg + " --out " + out + " --set stop.max_epochs=1").code == 0);
  const auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string ck = bytes(fs::path(out) / "checkpoint.h5"), metrics = bytes(fs::path(out) / "metrics.jsonl");
  // A learning rate that diverges at once: the run stops at step 1, without a checkpoint.
  Result r = run("train --config " + cfg + " --out " + out + " --force --set optimizer.lr=1e30");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("non-finite") && Catch::Contains("restored"));
  CHECK(bytes(fs::path(out) / "checkpoint.h5") == ck);
  CHECK(bytes(fs::path(out) / "metrics.jsonl") == metrics);
  CHECK_FALSE(fs::exists(fs::path(out) / "previous_run"));
  // A --force run that finishes replaces the earlier one and leaves nothing aside.
  REQUIRE(run("train --config " + cfg + " --out " + out + " --force --set stop.max_epochs=1 --set train.seed=2").code ==
          0);
  CHECK(bytes(fs::path(out) / "checkpoint.h5") != ck);
  CHECK_FALSE(fs::exists(fs::path(out) / "previous_run"));

  // A --force run killed before its first epoch (a crash, a time limit): the earlier run waits in previous_run/,
  // and the next --force keeps it there rather than the killed attempt's leftovers -- here that one fails too,
  // and the earlier run comes back.
  const std::string ck2 = bytes(fs::path(out) / "checkpoint.h5");
  r = run_prefixed("MRMF_FAULT_EXIT=0:1 ", "train --config " + cfg + " --out " + out + " --force --set train.seed=3");
  CHECK(r.code != 0);
  CHECK(bytes(fs::path(out) / "previous_run" / "checkpoint.h5") == ck2);
  r = run("train --config " + cfg + " --out " + out + " --force --set optimizer.lr=1e30");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("an earlier --force attempt set aside"));
  CHECK(bytes(fs::path(out) / "checkpoint.h5") == ck2);
  CHECK_FALSE(fs::exists(fs::path(out) / "previous_run"));

  // --resume and --force together; --resume with metrics but no checkpoint (it would start over).
  r = run("train --config " + cfg + " --out " + out + " --resume --force");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("contradict each other"));
  fs::remove(fs::path(out) / "checkpoint.h5");
  const std::string kept = bytes(fs::path(out) / "metrics.jsonl");
  r = run("train --config " + cfg + " --out " + out + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("no checkpoint.h5 to continue from"));
  CHECK(bytes(fs::path(out) / "metrics.jsonl") == kept);

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
  std::ifstream rep(out / "report.md");
  const std::string report((std::istreambuf_iterator<char>(rep)), std::istreambuf_iterator<char>());
  CHECK_THAT(report, Catch::Contains("| diverged |") && !Catch::Contains("Partial"));
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
  // Step 6 of 4 per epoch: inside the second epoch (a step checkpoint), and
  // step 8: its last step (the epoch's own checkpoint).
  for (const char* at : {"0:6", "0:8"}) {
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
    CHECK(final_loss(cut) == final_loss(whole));  // bit for bit (deterministic CPU run)
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

TEST_CASE("cli: experiment.finetune_overrides reach the stages that fine-tune a transferred or fused model only",
          "[cli][experiment]") {
  SKIP_WITHOUT_BINARY();
  Scratch s;
  const fs::path exp = tiny_experiment(s, 128,
                                       "  methods: [baseline, mrt, mrmf1]\n"
                                       "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
                                       "  finetune_overrides: [schedule.warmup_steps=1000]\n");
  const fs::path out = s.dir / "exp";
  const Result r = run("experiment --config " + exp.string() + " --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
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
