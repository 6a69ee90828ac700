// The trainer end to end on a small generated Neuron Inverter file (T = 64,
// 256 training samples, a 3-stage model with kernel 3 and pool 2 so that T/2
// still fits): metrics and checkpoint files, bit-identical determinism,
// kill-and-resume, the stop rules, NaN handling, --init/--freeze, and clear
// errors for foreign checkpoints. Every case takes well under a second or two.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/communicator.h"
#include "core/error.h"
#include "data/formats.h"
#include "data/gen_neuron.h"
#include "fusion/bn_recalibrate.h"
#include "fusion/checkpoint.h"
#include "fusion/config.h"
#include "fusion/fuse.h"
#include "fusion/trainer.h"

using namespace mrmf;
namespace fs = std::filesystem;

namespace {

// One temporary folder per test process (CTest runs each case in its own
// process) holding the generated files; removed at exit.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("mrmf_trainer_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};
Scratch& scratch() {
  static Scratch s;
  return s;
}

// A singleton MPI world: the trainer talks to a Communicator even on one rank.
Communicator& world() {
  static bool inited = [] {
    mpi_init(nullptr, nullptr);
    std::atexit([] { mpi_finalize(); });
    return true;
  }();
  (void)inited;
  static Communicator w = Communicator::world();
  return w;
}

const std::string& ni_file() {
  static std::string path = [] {
    const std::string p = (scratch().dir / "ni64.h5").string();
    data::NeuronGenOptions o;
    o.train = 256;
    o.val = 64;
    o.test = 64;
    o.seed = 5;
    o.time_bins = 64;
    o.zscore_samples = 256;
    data::generate_neuron_inverter(p, o);
    return p;
  }();
  return path;
}

// A small model (about 10k parameters) with the original's structure: conv
// stages, the flat BatchNorm, FC with dropout -- so BN running statistics and
// the dropout RNG are part of what resume must restore.
std::string base_yaml() {
  return "model:\n"
         "  name: neuron_inverter\n"
         "  options: {conv_channels: '8,16,16', kernel: 3, pool: 2, fc: '32,32', dropout: 0.1}\n"
         "data: {format: neuron_inverter, path: '" +
         ni_file() +
         "', prefetch: 2}\n"
         "train: {batch_size: 32, seed: 3, deterministic: true, checkpoint_every: 1}\n"
         "optimizer: {name: adam, lr: 2.0e-3}\n"
         "schedule: {type: plateau, warmup_epochs: 2, plateau_patience: 1, plateau_cooldown: 0, "
         "plateau_factor: 0.5}\n"
         "stop: {max_epochs: 4}\n"
         "runtime: {device: cpu}\n";
}

RunConfig config(std::vector<std::string> sets = {}) { return parse_run_config(base_yaml(), sets); }

FitResult run(const RunConfig& cfg, const std::string& out, bool resume = false,
              std::function<void(const EpochRecord&)> on_epoch = nullptr) {
  TrainerOptions o;
  o.out_dir = out;
  o.resume = resume;
  o.progress = false;
  o.on_epoch = std::move(on_epoch);
  Trainer t(cfg, world(), Device::cpu(), o);
  return t.fit();
}

std::string out_dir(const std::string& name) { return (scratch().dir / name).string(); }
std::string ckpt(const std::string& dir) { return (fs::path(dir) / "checkpoint.h5").string(); }

// Parameters and buffers (BN running statistics) of a checkpoint, as raw bytes.
std::string weights_of(const std::string& path) {
  LoadedModel m = load_model_from_checkpoint(path, Device::cpu());
  const Tensor v = m.model->params().values(), b = m.model->params().buffers();
  std::string s(static_cast<const char*>(v.raw_data()), v.nbytes());
  if (b.numel() > 0) s.append(static_cast<const char*>(b.raw_data()), b.nbytes());
  return s;
}

std::vector<nlohmann::json> metrics_of(const std::string& dir) {
  std::vector<nlohmann::json> v;
  std::ifstream in(fs::path(dir) / "metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

struct Thrown {};  // simulates a kill from inside the epoch loop

}  // namespace

TEST_CASE("trainer: metrics.jsonl has every column per epoch and a checkpoint is written", "[trainer]") {
  const std::string out = out_dir("metrics");
  const FitResult r = run(config({"stop.max_epochs=2"}), out);
  REQUIRE(r.epochs() == 2);
  CHECK(r.stop_reason == "max_epochs");
  const auto m = metrics_of(out);
  REQUIRE(m.size() == 2);
  for (size_t e = 0; e < m.size(); ++e) {
    for (const char* k : {"epoch", "train_loss", "val_loss", "lr", "io_s", "compute_s", "comm_s", "comm_in_flight_s",
                          "epoch_s", "samples_per_s", "steps", "samples"})
      CHECK(m[e].contains(k));
    CHECK(m[e]["epoch"].get<int64_t>() == static_cast<int64_t>(e));
    CHECK(m[e]["steps"].get<int64_t>() == 8);  // 256 / 32
    CHECK(m[e]["samples"].get<int64_t>() == 256);
    CHECK(std::isfinite(m[e]["train_loss"].get<double>()));
    CHECK(m[e]["samples_per_s"].get<double>() > 0);
    // The breakdown: one rank has no communication; the columns are parts
    // of the epoch's wall time (io + compute + validation <= epoch).
    const double io = m[e]["io_s"].get<double>(), compute = m[e]["compute_s"].get<double>(),
                 val = m[e]["val_s"].get<double>(), wall = m[e]["epoch_s"].get<double>();
    CHECK(m[e]["comm_s"].get<double>() == 0.0);
    CHECK(m[e]["comm_in_flight_s"].get<double>() == 0.0);
    CHECK(compute > 0);
    CHECK(io >= 0);
    CHECK(io + compute + val <= wall * 1.001 + 1e-4);
  }
  // Warmup over 2 epochs: lr * (epoch + 1) / 2.
  CHECK(m[0]["lr"].get<double>() == Approx(1e-3));
  CHECK(m[1]["lr"].get<double>() == Approx(2e-3));
  const CheckpointHeader h = read_checkpoint_header(ckpt(out));
  CHECK(h.training.epoch == 2);
  CHECK(h.training.step == 16);
  CHECK(h.has_optimizer);
  CHECK(h.has_scheduler);
  CHECK(parse_run_config(h.training.config, {}).hash() == config({"stop.max_epochs=2"}).hash());
}

TEST_CASE("trainer: the deterministic mode gives bit-identical weights for the same seed", "[trainer]") {
  run(config({"stop.max_epochs=2"}), out_dir("det_a"));
  run(config({"stop.max_epochs=2"}), out_dir("det_b"));
  run(config({"stop.max_epochs=2", "train.seed=4"}), out_dir("det_c"));
  const std::string a = weights_of(ckpt(out_dir("det_a")));
  CHECK(a == weights_of(ckpt(out_dir("det_b"))));
  CHECK(a != weights_of(ckpt(out_dir("det_c"))));
  CHECK(metrics_of(out_dir("det_a"))[1]["train_loss"] == metrics_of(out_dir("det_b"))[1]["train_loss"]);
}

TEST_CASE("trainer: kill and resume ends with bit-identical weights", "[trainer]") {
  // Reference: 4 epochs in one go.
  const FitResult full = run(config(), out_dir("res_full"));
  REQUIRE(full.epochs() == 4);
  const std::string want = weights_of(ckpt(out_dir("res_full")));
  const auto want_metrics = metrics_of(out_dir("res_full"));

  SECTION("2 epochs, then --resume to 4") {
    const std::string out = out_dir("res_2_4");
    run(config({"stop.max_epochs=2"}), out);
    const FitResult rest = run(config(), out, /*resume=*/true);
    CHECK(rest.epochs() == 2);  // only the missing epochs ran
    CHECK(weights_of(ckpt(out)) == want);
    const auto m = metrics_of(out);
    REQUIRE(m.size() == 4);
    for (size_t e = 0; e < 4; ++e) CHECK(m[e]["train_loss"] == want_metrics[e]["train_loss"]);
    CHECK(read_checkpoint_header(ckpt(out)).training.step == 32);
  }
  SECTION("killed in epoch 3 after its metrics line, with a torn line after it") {
    const std::string out = out_dir("res_kill");
    // The callback runs after epoch 2's metrics are written and before its
    // checkpoint: throwing there leaves checkpoint = epoch 2, metrics = 3 lines.
    CHECK_THROWS_AS(run(config(), out, false,
                        [](const EpochRecord& r) {
                          if (r.epoch == 2) throw Thrown{};
                        }),
                    Thrown);
    CHECK(read_checkpoint_header(ckpt(out)).training.epoch == 2);
    CHECK(metrics_of(out).size() == 3);
    std::ofstream(fs::path(out) / "metrics.jsonl", std::ios::app) << "{\"epoch\": 3, \"train_lo";  // torn write
    run(config(), out, /*resume=*/true);
    CHECK(weights_of(ckpt(out)) == want);
    const auto m = metrics_of(out);  // parses: the torn line and epoch 2's first attempt are gone
    REQUIRE(m.size() == 4);
    for (size_t e = 0; e < 4; ++e) {
      CHECK(m[e]["epoch"].get<int64_t>() == static_cast<int64_t>(e));
      CHECK(m[e]["val_loss"] == want_metrics[e]["val_loss"]);
    }
  }
  SECTION("killed mid-epoch, resumed from a mid-epoch checkpoint") {
    const std::string out = out_dir("res_mid");
    // Checkpoints every 5 steps; killed at step 11 (epoch 1, after 3 of its 8
    // batches): the last checkpoint is step 10, inside epoch 1 after 2 batches.
    TrainerOptions o;
    o.out_dir = out;
    o.progress = false;
    o.on_step = [](int64_t step) {
      if (step == 11) throw Thrown{};
    };
    {
      Trainer t(config({"train.checkpoint_every_steps=5"}), world(), Device::cpu(), o);
      CHECK_THROWS_AS(t.fit(), Thrown);
    }
    const CheckpointHeader h = read_checkpoint_header(ckpt(out));
    CHECK(h.training.epoch == 1);
    CHECK(h.training.step == 10);
    CHECK(std::get<int64_t>(h.training.state.at("loader_batch")) == 2);
    // Resumed (the interval may change on resume): the rest of epoch 1 with
    // the same sample order, dropout stream and running loss, then epochs 2-3.
    const FitResult rest = run(config({"train.checkpoint_every_steps=3"}), out, /*resume=*/true);
    CHECK(rest.epochs() == 3);
    CHECK(weights_of(ckpt(out)) == want);
    const auto m = metrics_of(out);
    REQUIRE(m.size() == 4);
    for (size_t e = 0; e < 4; ++e) {
      CHECK(m[e]["train_loss"] == want_metrics[e]["train_loss"]);
      CHECK(m[e]["val_loss"] == want_metrics[e]["val_loss"]);
      // The continued epoch is partial: its steps are the 6 this process ran.
      const int64_t done_before = e == 1 ? 2 : 0;
      CHECK(m[e]["steps"].get<int64_t>() == want_metrics[e]["steps"].get<int64_t>() - done_before);
      CHECK(m[e].value("resumed_at_step", int64_t{0}) == done_before);
    }
  }
  SECTION("resuming with a different training configuration is refused") {
    const std::string out = out_dir("res_cfg");
    run(config({"stop.max_epochs=1"}), out);
    REQUIRE_THROWS_WITH(run(config({"optimizer.lr=1e-2"}), out, true),
                        Catch::Contains("--resume") && Catch::Contains("different configuration") &&
                            Catch::Contains("optimizer.lr: ") && Catch::Contains("-> 0.01"));
  }
  SECTION("resuming a finished run trains nothing and reports its last validation loss") {
    const std::string out = out_dir("res_done");
    const FitResult done = run(config({"stop.max_epochs=1"}), out);
    const FitResult again = run(config({"stop.max_epochs=1"}), out, /*resume=*/true);
    CHECK(again.epochs() == 0);
    CHECK(again.resumed_epochs == 1);
    CHECK(again.final_val_loss == done.final_val_loss);
    // A NaN validation loss is written as null: resuming still works.
    const fs::path mp = fs::path(out) / "metrics.jsonl";
    std::string line;
    std::getline(std::ifstream(mp) >> std::ws, line);
    auto j = nlohmann::json::parse(line);
    j["val_loss"] = nullptr;
    std::ofstream(mp) << j.dump() << "\n";
    CHECK_NOTHROW(run(config({"stop.max_epochs=1"}), out, /*resume=*/true));
  }
  SECTION("resuming a run that stopped on its target or plateau trains nothing more") {
    const std::string out = out_dir("res_target");
    const FitResult done = run(config({"stop.target_val_loss=10"}), out);  // met after the first epoch
    REQUIRE(done.stop_reason == "target");
    REQUIRE(done.epochs() == 1);
    const FitResult again = run(config({"stop.target_val_loss=10"}), out, /*resume=*/true);
    CHECK(again.epochs() == 0);
    CHECK(again.stop_reason == "target");
    CHECK(again.reached_target);
    CHECK(again.final_val_loss == done.final_val_loss);
    // A lower target lets the same run go on.
    CHECK(run(config({"stop.target_val_loss=1e-6", "stop.max_epochs=2"}), out, true).epochs() == 1);
    const std::string out2 = out_dir("res_plateau");
    const FitResult flat = run(config({"stop.plateau_threshold=10", "stop.plateau_patience=1"}), out2);
    REQUIRE(flat.stop_reason == "plateau");
    const FitResult again2 = run(config({"stop.plateau_threshold=10", "stop.plateau_patience=1"}), out2, true);
    CHECK(again2.epochs() == 0);
    CHECK(again2.stop_reason == "plateau");
  }
  SECTION("stop.min_epochs holds a plateau rule back, also across a resume") {
    // Threshold 10: every reduction is "small", so the rule alone stops
    // after epoch 2 (above); min_epochs 4 makes it epoch 4, and a run
    // interrupted after 2 epochs and resumed stops there too.
    const std::vector<std::string> rule = {"stop.plateau_threshold=10", "stop.plateau_patience=1",
                                           "stop.min_epochs=4", "stop.max_epochs=6"};
    const FitResult held = run(config(rule), out_dir("min_epochs"));
    CHECK(held.stop_reason == "plateau");
    CHECK(held.epochs() == 4);
    std::vector<std::string> first_two = rule;
    first_two.back() = "stop.max_epochs=2";
    const std::string out3 = out_dir("min_epochs_resumed");
    REQUIRE(run(config(first_two), out3).epochs() == 2);
    const FitResult resumed = run(config(rule), out3, /*resume=*/true);
    CHECK(resumed.stop_reason == "plateau");
    CHECK(resumed.epochs() == 2);  // epochs 3 and 4
  }
}

TEST_CASE("trainer: target validation loss and the plateau rule stop exactly when they should", "[trainer]") {
  const FitResult base = run(config({"stop.max_epochs=6"}), out_dir("stop_base"));
  REQUIRE(base.epochs() == 6);
  std::vector<double> val, train;
  for (const auto& r : base.history) {
    val.push_back(r.val_loss);
    train.push_back(r.train_loss);
  }
  SECTION("target") {
    // Aim at epoch 3's validation loss: the run stops at the first epoch at or below it.
    const double target = val[3];
    int64_t expect = 0;
    while (val[static_cast<size_t>(expect)] > target) ++expect;
    const FitResult r = run(config({"stop.max_epochs=6", fmt::format("stop.target_val_loss={:.17g}", target)}),
                            out_dir("stop_target"));
    CHECK(r.stop_reason == "target");
    CHECK(r.reached_target);
    CHECK(r.epochs() == expect + 1);
    CHECK(read_checkpoint_header(ckpt(out_dir("stop_target"))).training.epoch == expect + 1);
  }
  SECTION("plateau") {
    // Independent simulation of the rule on the base run's losses, for a
    // threshold between the smallest and largest reductions.
    std::vector<double> red;
    for (size_t e = 1; e < train.size(); ++e) red.push_back(train[e - 1] - train[e]);
    std::vector<double> sorted = red;
    std::sort(sorted.begin(), sorted.end());
    const double thr = 0.5 * (sorted[1] + sorted[2]);  // 2nd and 3rd smallest of 5 reductions
    const int64_t patience = 2;
    int64_t expect = -1, count = 0;
    for (size_t e = 1; e < train.size() && expect < 0; ++e) {
      count = (train[e - 1] - train[e] < thr) ? count + 1 : 0;
      if (count >= patience) expect = static_cast<int64_t>(e);
    }
    const FitResult r = run(config({"stop.max_epochs=6", fmt::format("stop.plateau_threshold={:.17g}", thr),
                                    "stop.plateau_patience=2"}),
                            out_dir("stop_plateau"));
    INFO("train losses " << train[0] << " " << train[1] << " " << train[2] << " " << train[3] << " " << train[4]
                         << " " << train[5] << ", threshold " << thr);
    if (expect >= 0) {
      CHECK(r.stop_reason == "plateau");
      CHECK(r.epochs() == expect + 1);
    } else {
      CHECK(r.stop_reason == "max_epochs");
      CHECK(r.epochs() == 6);
    }
    // A threshold no reduction reaches fires after exactly `patience` counted epochs (epochs 1 and 2).
    const FitResult all = run(config({"stop.max_epochs=6", "stop.plateau_threshold=1e9", "stop.plateau_patience=2"}),
                              out_dir("stop_plateau_all"));
    CHECK(all.stop_reason == "plateau");
    CHECK(all.epochs() == 3);
  }
}

TEST_CASE("trainer: after_stop trains past the stop while asked, and a stage restored as stopped does not",
          "[trainer]") {
  // The newest checkpoint's step when training step 27 ends (inside the
  // second extra epoch, steps 25-32): a step checkpoint would make it 27.
  int64_t saved_at_27 = -1;
  const auto fit_with = [&saved_at_27](const RunConfig& cfg, const std::string& out, bool resume, int more) {
    TrainerOptions o;
    o.on_step = [&saved_at_27, out](int64_t step) {
      if (step == 27) saved_at_27 = read_checkpoint_header(ckpt(out)).training.step;
    };
    o.out_dir = out;
    o.resume = resume;
    o.progress = false;
    int asked = 0;
    o.after_stop = [&asked, more] { return asked++ < more; };
    Trainer t(cfg, world(), Device::cpu(), o);
    FitResult r = t.fit();
    return std::make_pair(r, asked);
  };
  // Step checkpoints every 3 steps (8 per epoch): none may fall inside the extra epochs.
  const RunConfig cfg = config({"stop.max_epochs=2", "train.checkpoint_every_steps=3"});
  const std::string out = out_dir("after_stop");
  const auto [r, asked] = fit_with(cfg, out, false, 2);
  CHECK(r.stop_reason == "max_epochs");  // the stop reason stays
  CHECK(r.overtime_epochs == 2);
  CHECK(r.epochs() == 4);
  CHECK(asked == 3);  // asked after the stop and after each extra epoch
  const auto m = metrics_of(out);
  REQUIRE(m.size() == 4);
  CHECK(m[3]["epoch"].get<int64_t>() == 3);
  const CheckpointHeader h = read_checkpoint_header(ckpt(out));
  CHECK(h.training.epoch == 4);  // the extra epochs' end, not a step inside them
  CHECK(h.training.step == 32);
  CHECK(saved_at_27 == 24);
  // Restored as stopped: not asked at all, nothing trained, the weights kept.
  const std::string before = weights_of(ckpt(out));
  const auto [again, asked_again] = fit_with(cfg, out, true, 5);
  CHECK(again.epochs() == 0);
  CHECK(again.overtime_epochs == 0);
  CHECK(asked_again == 0);
  CHECK(weights_of(ckpt(out)) == before);
  // Without the hook, or answering no at once: exactly the stop.
  const auto [none, asked_none] = fit_with(cfg, out_dir("after_stop_no"), false, 0);
  CHECK(none.epochs() == 2);
  CHECK(none.overtime_epochs == 0);
  CHECK(asked_none == 1);
}

TEST_CASE("trainer: end_extra_epoch ends an extra epoch at a step, recorded as cut short", "[trainer]") {
  const RunConfig cfg = config({"stop.max_epochs=2"});  // 8 steps per epoch
  const std::string out = out_dir("end_extra");
  TrainerOptions o;
  o.out_dir = out;
  o.progress = false;
  int64_t step = 0, asked_end = 0;
  o.on_step = [&step](int64_t s) { step = s; };
  o.after_stop = [] { return true; };  // would train on for ever
  o.end_extra_epoch = [&] {
    ++asked_end;
    return step >= 19;  // the other group is done during the first extra epoch (steps 17-24)
  };
  Trainer t(cfg, world(), Device::cpu(), o);
  const FitResult r = t.fit();
  CHECK(asked_end == 3);  // after steps 17, 18, 19 -- never inside ordinary epochs
  CHECK(r.overtime_epochs == 1);
  REQUIRE(r.epochs() == 3);
  CHECK(r.history[2].cut_short);
  CHECK(r.history[2].steps == 3);
  CHECK_FALSE(r.history[1].cut_short);
  const auto m = metrics_of(out);
  REQUIRE(m.size() == 3);
  CHECK(m[2]["cut_short"] == true);
  CHECK(m[2]["steps"] == 3);
  CHECK_FALSE(m[1].contains("cut_short"));
  CHECK(EpochRecord::from_json(m[2]).partial());
  const CheckpointHeader h = read_checkpoint_header(ckpt(out));
  CHECK(h.training.epoch == 3);
  CHECK(h.training.step == 19);
}

TEST_CASE("trainer: a non-finite loss stops with the epoch and step and keeps the last good checkpoint",
          "[trainer]") {
  // Epoch 0 trains at 1e-3; from step 8 (epoch 1) the learning rate is 1e30,
  // which blows the weights up and the loss becomes NaN/Inf a step later.
  const std::string out = out_dir("nan");
  const RunConfig cfg = config({"schedule.type=piecewise", "schedule.warmup_epochs=0", "schedule.boundaries=[8]",
                                "schedule.values=[1e-3, 1e30]"});
  try {
    run(cfg, out);
    FAIL("no error for an exploding loss");
  } catch (const NonFiniteLoss& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    // Step 8 is the first at 1e30; the loss it reports is still finite, a later one is not
    // (flat BN keeps the blown-up activations bounded for a step or two).
    CHECK_THAT(std::string(e.what()), Catch::Contains("non-finite training loss") &&
                                          Catch::Matches(".*at epoch 1, step (9|1[0-5]);.*") && Catch::Contains(out));
  }
  const CheckpointHeader h = read_checkpoint_header(ckpt(out));
  CHECK(h.training.epoch == 1);
  CHECK(h.training.step == 8);
  const std::string w = weights_of(ckpt(out));
  const float* p = reinterpret_cast<const float*>(w.data());
  for (size_t i = 0; i < w.size() / 4; ++i) REQUIRE(std::isfinite(p[i]));
  CHECK(metrics_of(out).size() == 1);
  // Blown up within the first epoch: no checkpoint to point to, and the message says so.
  try {
    run(config({"schedule.type=piecewise", "schedule.warmup_epochs=0", "schedule.boundaries=[1]",
                "schedule.values=[1e30, 1e30]"}),
        out_dir("nan0"));
    FAIL("no error for an exploding loss");
  } catch (const NonFiniteLoss& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("at epoch 0") && Catch::Contains("no checkpoint had been written yet"));
  }
  CHECK_FALSE(fs::exists(ckpt(out_dir("nan0"))));
}

TEST_CASE("trainer: --init from another run's checkpoint, all or bottom only with freeze", "[trainer]") {
  const std::string src = out_dir("init_src");
  run(config({"stop.max_epochs=1"}), src);
  LoadedModel a = load_model_from_checkpoint(ckpt(src), Device::cpu());
  auto group_bytes = [](Model& m, ParamGroup g) {
    const auto [b, e] = m.params().group_range(g);
    const Tensor v = m.params().values();
    return std::string(static_cast<const char*>(v.raw_data()) + b * 4, static_cast<size_t>(e - b) * 4);
  };
  SECTION("all") {
    TrainerOptions o;
    o.progress = false;
    Trainer t(config({"train.init=" + ckpt(src), "train.seed=9"}), world(), Device::cpu(), o);
    CHECK(group_bytes(t.model(), ParamGroup::Bottom) == group_bytes(*a.model, ParamGroup::Bottom));
    CHECK(group_bytes(t.model(), ParamGroup::Top) == group_bytes(*a.model, ParamGroup::Top));
  }
  SECTION("bottom only, frozen, from a coarse (T/2) run") {
    const std::string coarse = out_dir("init_coarse");
    run(config({"stop.max_epochs=1", "data.reduce=[2]"}), coarse);
    LoadedModel c = load_model_from_checkpoint(ckpt(coarse), Device::cpu());
    const std::string out = out_dir("init_bottom");
    TrainerOptions o;
    o.progress = false;
    o.out_dir = out;
    Trainer t(config({"train.init=" + ckpt(coarse), "train.init_groups=bottom", "train.freeze=bottom",
                      "stop.max_epochs=1"}),
              world(), Device::cpu(), o);
    CHECK(group_bytes(t.model(), ParamGroup::Bottom) == group_bytes(*c.model, ParamGroup::Bottom));
    const std::string top0 = group_bytes(t.model(), ParamGroup::Top);
    t.fit();
    CHECK(group_bytes(t.model(), ParamGroup::Bottom) == group_bytes(*c.model, ParamGroup::Bottom));  // frozen
    CHECK(group_bytes(t.model(), ParamGroup::Top) != top0);                                         // trained
  }
}

TEST_CASE("trainer: a checkpoint from another model or shape is a clear error", "[trainer]") {
  const std::string coarse = out_dir("other_coarse");
  run(config({"stop.max_epochs=1", "data.reduce=[2]"}), coarse);
  TrainerOptions o;
  o.progress = false;
  // Full init needs the same input shape: (3, 32) vs (3, 64).
  REQUIRE_THROWS_WITH(Trainer(config({"train.init=" + ckpt(coarse)}), world(), Device::cpu(), o),
                      Catch::Contains("[3, 32]") && Catch::Contains("[3, 64]"));
  // Another architecture: the parameter and both shapes are named.
  const std::string wide = out_dir("other_wide");
  run(parse_run_config(base_yaml(), {"stop.max_epochs=1", "model.options.conv_channels='8,16,24'"}), wide);
  try {
    Trainer t(config({"train.init=" + ckpt(wide)}), world(), Device::cpu(), o);
    FAIL("no error for a checkpoint of another architecture");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Shape);
    CHECK_THAT(std::string(e.what()), Catch::Contains("cnn_block.6.weight") && Catch::Contains("(24, 16, 3)"));
  }
  // A validation set at another resolution than the training set (a coarse
  // copy given as data.val_files): the split and its file are named.
  {
    const std::string coarse_val = out_dir("val_t32.h5");
    data::NeuronInverterWriter w(coarse_val, DType::F32);
    w.create_split(data::Split::Val, 64, 32, 3);
    w.write(data::Split::Val, 0, Tensor::full({64, 32, 3}, 0.5f), Tensor::full({64, 19}, 0.f));
    w.close();
    REQUIRE_THROWS_WITH(Trainer(config({"data.val_files=" + coarse_val}), world(), Device::cpu(), o),
                        Catch::Contains("the val split (" + coarse_val + ") has samples of [3, 32]") &&
                            Catch::Contains("the model expects [3, 64]"));
  }
  // Another model altogether (a missing file is a Data error naming it).
  REQUIRE_THROWS_WITH(Trainer(config({"train.init=" + out_dir("nope.h5")}), world(), Device::cpu(), o),
                      Catch::Contains("nope.h5"));
}

TEST_CASE("trainer: the Neuron Inverter learns generated data on the CPU", "[trainer][learning]") {
  // T = 200 bins, 4096 training samples, the original architecture, 4 epochs.
  // Predicting the label mean scores the label variance (about 1/3 for
  // u ~ U[-1, 1]); measured: validation MSE about 0.24-0.26 after 4 epochs
  // (0.75 x variance), still falling (docs/results_training.md has a longer
  // run). "Clearly learned": below 0.85 x the validation labels' variance.
  const std::string data = (scratch().dir / "ni200.h5").string();
  data::NeuronGenOptions g;
  g.train = 4096;
  g.val = 512;
  g.test = 0;
  g.seed = 2;
  g.time_bins = 200;
  data::generate_neuron_inverter(data, g);
  const Tensor y = data::NeuronInverterFile::open(data, {data::Split::Val}).read(data::Split::Val, 0, 512).labels;
  double mean = 0, var = 0;
  for (int64_t i = 0; i < y.numel(); ++i) mean += y.data<float>()[i];
  mean /= static_cast<double>(y.numel());
  for (int64_t i = 0; i < y.numel(); ++i) var += (y.data<float>()[i] - mean) * (y.data<float>()[i] - mean);
  var /= static_cast<double>(y.numel());
  const RunConfig cfg = parse_run_config("model: {name: neuron_inverter}\n"
                                         "data: {format: neuron_inverter, path: '" + data + "'}\n"
                                         "train: {batch_size: 32, seed: 1}\n"
                                         "optimizer: {name: adam, lr: 1.0e-3}\n"
                                         "stop: {max_epochs: 4}\nruntime: {device: cpu}\n",
                                         {});
  const FitResult r = run(cfg, "");
  INFO("label variance " << var << ", validation MSE per epoch " << r.history[0].val_loss << " "
                         << r.history[1].val_loss << " " << r.history[2].val_loss << " " << r.history[3].val_loss);
  CHECK(r.final_val_loss < 0.85 * var);
  CHECK(r.final_val_loss < r.history[0].val_loss);
}

TEST_CASE("BN re-calibration: running statistics become the mean of the batch statistics, nothing else changes",
          "[trainer][fusion][bn]") {
  TrainerOptions o;
  o.progress = false;
  Trainer t(config(), world(), Device::cpu(), o);
  Model& m = t.model();
  ParamStore& ps = m.params();
  // Stale statistics, as a fused model's would be after a change of resolution.
  Tensor buf = ps.buffers();
  for (int64_t i = 0; i < buf.numel(); ++i) buf.data<float>()[i] = 7.f;
  const Tensor values_before = ps.values().clone();
  t.context().set_step(41);
  const int64_t n = 3;
  REQUIRE(t.train_loader().batches_per_epoch() > n);

  // Oracle: each batch's own statistics (a copy of the model, momentum 1, the
  // same context settings), averaged here.
  std::vector<Tensor> xs;
  t.train_loader().start_epoch(0);
  data::LoaderBatch b;
  for (int64_t k = 0; k < n && t.train_loader().next(b); ++k) xs.push_back(b.x);
  REQUIRE(static_cast<int64_t>(xs.size()) == n);
  std::vector<double> expect(static_cast<size_t>(buf.numel()), 0.0);
  for (const Tensor& x : xs) {
    auto copy = clone_model(m, t.spec(), Device::cpu());
    Context c(Device::cpu(), t.context().options());
    c.set_step(41);
    c.set_bn_momentum_override(1.0);
    (void)copy->forward(c, x);
    const Tensor cb = copy->params().buffers();
    for (int64_t i = 0; i < cb.numel(); ++i) expect[static_cast<size_t>(i)] += cb.data<float>()[i] / double(n);
  }

  const BnRecalibration r = recalibrate_batchnorm(m, t.context(), t.train_loader(), world(), n);
  REQUIRE(r.batches == n);
  int stats = 0;
  for (const auto& e : ps.entries()) {
    if (e.kind != ParamKind::Buffer) continue;
    INFO(e.name);
    const Tensor v = ps.value(ps.at(e.name));
    for (int64_t i = 0; i < v.numel(); ++i) {
      const float got = v.data<float>()[i];
      if (e.name.find("num_batches_tracked") != std::string::npos) {
        REQUIRE(got == 7.f + n);
        continue;
      }
      const double want = expect[static_cast<size_t>(e.offset + i)];
      REQUIRE(std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want)));
      REQUIRE(std::fabs(got - 7.0) > 1e-3);  // really re-estimated
    }
    ++stats;
  }
  REQUIRE(stats >= 3);  // flat BN: running_mean, running_var, num_batches_tracked
  // Weights untouched; context back to normal; the loader went on after the batches it used.
  REQUIRE(std::memcmp(ps.values().raw_data(), values_before.raw_data(), values_before.nbytes()) == 0);
  REQUIRE(t.context().training());
  REQUIRE(t.context().step() == 41);
  REQUIRE(t.context().bn_momentum(0.3) == 0.3);
  REQUIRE(t.train_loader().state().batch == n);

  // More batches than an epoch has: one epoch.
  REQUIRE(recalibrate_batchnorm(m, t.context(), t.train_loader(), world(), 100000).batches ==
          t.train_loader().batches_per_epoch());
  REQUIRE_THROWS_WITH(recalibrate_batchnorm(m, t.context(), t.train_loader(), world(), -1),
                      Catch::Contains("batches must be >= 0"));
  // A model without BatchNorm has nothing to re-estimate.
  Trainer nobn(config({"model.options.flat_bn=false"}), world(), Device::cpu(), o);
  REQUIRE(nobn.model().params().buffers().numel() == 0);
  REQUIRE(recalibrate_batchnorm(nobn.model(), nobn.context(), nobn.train_loader(), world(), 2).batches == 0);
}

TEST_CASE("trainer: precise BN re-estimates the statistics before each validation, training unchanged",
          "[trainer][bn]") {
  const std::string plain = out_dir("precise_off"), precise = out_dir("precise_on");
  const FitResult a = run(config({"stop.max_epochs=2"}), plain);
  const FitResult b = run(config({"stop.max_epochs=2", "train.precise_bn_batches=3"}), precise);
  LoadedModel ma = load_model_from_checkpoint(ckpt(plain), Device::cpu());
  LoadedModel mb = load_model_from_checkpoint(ckpt(precise), Device::cpu());
  // Training uses batch statistics only, and the pass restores the dropout
  // step and the loader order: the weights are bit-identical.
  const Tensor va = ma.model->params().values(), vb = mb.model->params().values();
  REQUIRE(std::memcmp(va.raw_data(), vb.raw_data(), va.nbytes()) == 0);
  REQUIRE(a.history[1].train_loss == b.history[1].train_loss);
  REQUIRE(a.history[1].val_loss != b.history[1].val_loss);
  // The saved statistics are exactly a re-calibration of the final weights on
  // the first 3 batches of the last epoch.
  Trainer t(config(), world(), Device::cpu(), TrainerOptions{});
  t.set_model(std::move(ma.model));
  REQUIRE(recalibrate_batchnorm(t.model(), t.context(), t.train_loader(), world(), 3, 1).batches == 3);
  const ParamStore &want = t.model().params(), &got = mb.model->params();
  int compared = 0;
  for (const auto& e : got.entries()) {
    if (e.kind != ParamKind::Buffer || e.name.find("running_") == std::string::npos) continue;
    INFO(e.name);
    const Tensor x = got.value(got.at(e.name)), y = want.value(want.at(e.name));
    REQUIRE(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0);
    ++compared;
  }
  REQUIRE(compared == 2);
  REQUIRE_THROWS_WITH(config({"train.precise_bn_batches=-1"}), Catch::Contains("train.precise_bn_batches"));
}

TEST_CASE("trainer: schedule.warmup_steps ramps the learning rate over optimizer steps, then the schedule runs",
          "[trainer]") {
  // What experiment.finetune_overrides uses to ease a transferred model in:
  // lr * (step + 1) / S for steps 0 .. S-1 of the stage, whatever the epoch.
  RunConfig cfg = parse_run_config("", {"optimizer.lr=2e-3", "schedule.type=piecewise", "schedule.boundaries=[40]",
                                        "schedule.values=[2e-3, 2e-4]", "schedule.warmup_steps=16"});
  const auto s = make_schedule(cfg);
  CHECK(s->lr(0, 0) == Approx(2e-3 / 16));
  CHECK(s->lr(0, 7) == Approx(2e-3 * 8 / 16));
  CHECK(s->lr(3, 15) == Approx(2e-3));  // the epoch does not matter
  CHECK(s->lr(3, 16) == 2e-3);
  CHECK(s->lr(9, 41) == 2e-4);  // the inner schedule's own decay, on the same step count
  CHECK_THAT(s->describe(), Catch::Contains("linear warmup over 16 steps"));
  cfg = parse_run_config("", {"optimizer.lr=1e-3"});
  CHECK(make_schedule(cfg)->lr(0, 0) == 1e-3);  // off by default
}
