// The `mrmf` command as a user runs it: exit codes (0 ok, 2 usage or
// configuration, 1 runtime/data), messages that name what is wrong, and a
// train -> eval -> predict round trip on a tiny generated file.
// Experiments through the CLI: test_cli_experiment.cpp; outputs that
// --force, a full disk or SIGTERM must not lose: test_cli_keeps_files.cpp;
// the shared runner: tests/support/cli_runner.h.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/formats.h"
#include "data/h5file.h"
#include "support/cli_runner.h"

using namespace mrmf;
using namespace mrmf::clitest;

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

  // Sample counts each allowed but summing past int64: refused by the space
  // check (the wrapped sum once passed it, and generation never ended).
  for (const char* gen : {"cosmoflow --size 16", "neuron-inverter"}) {
    INFO(gen);
    r = run(std::string("datagen ") + gen + " --out " + (s.dir / "huge").string() +
            " --train 4611686018427387904 --val 4611686018427387904 --test 1");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("the data set needs about") && Catch::Contains("check the sample counts"));
  }
  CHECK_FALSE(fs::exists(s.dir / "huge"));
}

TEST_CASE("cli: MRMF_CPU_AVX512 switches the data rows' AVX-512 pieces, and a bad value is refused", "[cli]") {
  SKIP_WITHOUT_BINARY();
  Result r = run_prefixed("MRMF_CPU_AVX512=0 ", "info");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("CPU data rows: plain loops"));
  r = run("info");
  CHECK(r.code == 0);
  // On: AVX-512 where the CPU has it, else the plain loops (with the AVX2
  // pieces where the CPU has AVX2) and why.
  CHECK_THAT(r.out, Catch::Contains("CPU data rows: AVX-512 (MRMF_CPU_AVX512=0 turns it off)") ||
                        Catch::Contains("CPU data rows: plain loops (this CPU has no AVX-512F)") ||
                        Catch::Contains("CPU data rows: plain loops, AVX2 for four 16-bit channels (this CPU has no "
                                        "AVX-512F)"));
  r = run_prefixed("MRMF_CPU_AVX512=yes ", "info");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("MRMF_CPU_AVX512='yes'") && Catch::Contains("expected 0"));
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
  // Values past the flag's type, and booleans CLI11 read loosely ('' and -1
  // as false, 1.5 as true): named (session 59's fuzzing).
  for (const auto& [flags, says] :
       {std::pair<std::string, std::string>{"--steps 2147483648", "--steps: must be at most 1000000, got 2147483648"},
        {"--tf32 ''", "--tf32: expected 0 or 1 (true/false, on/off, yes/no), got ''"},
        {"--tf32 1.5", "--tf32: expected 0 or 1"},
        {"--cudnn-benchmark -1", "--cudnn-benchmark: expected 0 or 1"},
        {"--device ''", "--device: must not be empty"}}) {
    r = run("bench --workload ni400 " + flags);
    INFO(flags << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(says));
  }
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
  // A batch whose BatchNorm would see one value a channel: refused before the
  // build (the step failed, exit 1), where the model has one that would.
  r = run("bench --device cpu --workload ni1600 --steps 1 --warmup 0 --batch 1");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("bench --batch 1: ni1600's BatchNorm layer 'flat_bn' (input [1, "));
  r = run("train --config " + cfg + " --out " + (s.dir / "b1").string() + " --set train.batch_size=1");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("config key 'train.batch_size': 1 sample(s) a rank leave BatchNorm layer "
                                    "'flat_bn'"));
  // Without that layer a batch of one trains.
  r = run("train --config " + cfg + " --out " + (s.dir / "b1_noflat").string() +
          " --set train.batch_size=1 --set model.options.flat_bn=false --set stop.max_epochs=1");
  CHECK(r.code == 0);
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
    const std::string bytes = slurp(good);
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
  CHECK_THAT(r.out, Catch::Contains("256 samples per rank per epoch"));
  // data.max_train_samples: the first 100 of the 256, 3 batches of 32. (And
  // a frozen group that no checkpoint loaded: said.)
  r = run("train --config " + cfg + " --out " + (s.dir / "run_sub").string() +
          " --set train.epochs=1 --set data.max_train_samples=100 --freeze bottom --set stop.plateau_threshold=0.01 "
          "--set stop.plateau_patience=2");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("the plateau rule (stop.plateau_threshold 0.01, patience 2, min_epochs 0) cannot "
                                    "fire within stop.max_epochs 1"));
  CHECK_THAT(r.out, Catch::Contains("96 samples per rank per epoch"));
  CHECK_THAT(r.out, Catch::Contains("train.freeze=bottom: that group is not loaded from a checkpoint (no train.init"));
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
  // predict --json: stdout is the JSON document alone (log lines went there
  // too); the data named are those read, here a --set's instead of --data.
  {
    const std::string other = (s.dir / "other.h5").string();
    fs::copy_file(data, other);
    r = run_stdout("predict --checkpoint " + ck + " --data " + data + " --set data.path=" + other +
                   " --split test --json --out " + (s.dir / "pred_json.h5").string());
    INFO(r.out);
    REQUIRE(r.code == 0);
    const auto pj = nlohmann::json::parse(r.out);  // throws on anything but one JSON document
    CHECK(pj["data"] == other);
    CHECK(data::H5File::open_read(s.dir / "pred_json.h5").read_string_attribute("/", "data").value_or("") == other);
    r = run("eval --checkpoint " + ck + " --data " + data + " --set data.val_files=" + other);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("val split of " + other + ","));
  }
  // data.scale of the wrong length: named as the config key, as train names it (exit 2).
  r = run("eval --checkpoint " + ck + " --data " + data + " --set data.transform=scale --set data.scale=[1,2]");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("config key 'data.scale': 2 factor(s) for data with 3 channels"));

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
  // A NaN in the frames is the data's fault, named as the loaders name it,
  // not "non-finite predictions" blamed on the checkpoint.
  const std::string nan_data = (s.dir / "nan_val.h5").string();
  {
    data::H5File h = data::H5File::create(nan_data);
    Tensor fr = Tensor::full({16, 64, 3}, 0.5f);
    fr.data<float>()[5 * 64 * 3 + 7] = std::nanf("");
    h.write("val_frames", fr);
    h.write("val_unitStar_par", Tensor::full({16, 19}, 0.1f));
  }
  for (const char* cmd : {"eval", "predict"}) {
    r = run(std::string(cmd) + " --checkpoint " + ck + " --data " + nan_data + " --split val" +
            (std::string(cmd) == "predict" ? " --out " + (s.dir / "nan_pred.h5").string() : ""));
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains("nan_val.h5: dataset 'val_frames': non-finite value nan at index [5, 2, 1]") &&
                          !Catch::Contains("diverged"));
  }
  CHECK_FALSE(fs::exists(s.dir / "nan_pred.h5"));
  // Where the training ran is not where eval runs: the checkpoint's
  // runtime.device does not override $MRMF_DEVICE (a bad value then fails,
  // named; before, the checkpoint's 'auto' hid it).
  const std::string out_auto = (s.dir / "run_auto").string();
  REQUIRE(
      run("train --config " + cfg + " --out " + out_auto + " --set train.epochs=1 --set runtime.device=auto").code ==
      0);
  r = run_prefixed("MRMF_DEVICE=bogus ", "eval --checkpoint " + out_auto + "/checkpoint.h5 --data " + data);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("$MRMF_DEVICE: unknown device 'bogus'"));  // the variable named, not a flag
  r = run("eval --checkpoint '' --data " + data);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--checkpoint") && Catch::Contains("must not be empty"));
  r = run("eval --checkpoint " + out_auto + "/checkpoint.h5 --data " + data);
  CHECK(r.code == 0);
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
