// The trainer's checkpoints on a small generated Neuron Inverter file
// (tests/support/trainer_fixtures.h): kill-and-resume with bit-identical
// weights, a non-finite loss keeping the last good checkpoint, --init and
// --freeze from another run, and clear errors for foreign checkpoints.

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/communicator.h"
#include "core/error.h"
#include "data/formats.h"
#include "data/gen_neuron.h"
#include "fusion/checkpoint.h"
#include "fusion/config.h"
#include "fusion/trainer.h"
#include "support/trainer_fixtures.h"

using namespace mrmf;
namespace fs = std::filesystem;
using namespace mrmf::test::trainer;

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
    const FitResult rest = run(config(), out, /*resume=*/true);
    CHECK(rest.epochs() == 2);  // resumed: epochs 2 and 3 only (a fresh start would run 4)
    CHECK(rest.resumed_epochs == 2);
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
    // A pause inside epoch 1 before its checkpoint: time the stage spent
    // there, which the resumed run must count although this process dies.
    // A run killed at step `kill_at`, paused 250 ms at step `pause_at`.
    const auto interrupted = [&](const RunConfig& cfg, int64_t pause_at, int64_t kill_at) {
      o.on_step = [=](int64_t step) {
        if (step == pause_at) std::this_thread::sleep_for(std::chrono::milliseconds(250));
        if (step == kill_at) throw Thrown{};
      };
      Trainer t(cfg, world(), Device::cpu(), o);
      CHECK_THROWS_AS(t.fit(), Thrown);
    };
    interrupted(config({"train.checkpoint_every_steps=5"}), 9, 11);
    const CheckpointHeader h = read_checkpoint_header(ckpt(out));
    CHECK(h.training.epoch == 1);
    CHECK(h.training.step == 10);
    CHECK(std::get<int64_t>(h.training.state.at("loader_batch")) == 2);
    const double first_part = std::get<double>(h.training.state.at("epoch_elapsed_s"));
    CHECK(first_part >= 0.25);
    // Resumed (the interval may change on resume) and interrupted again in
    // the same epoch: its checkpoint at step 12 holds both parts.
    o.resume = true;
    interrupted(config({"train.checkpoint_every_steps=3"}), 11, 13);
    const CheckpointHeader h2 = read_checkpoint_header(ckpt(out));
    REQUIRE(h2.training.step == 12);
    CHECK(std::get<int64_t>(h2.training.state.at("loader_batch")) == 4);
    const double both_parts = std::get<double>(h2.training.state.at("epoch_elapsed_s"));
    CHECK(both_parts >= first_part + 0.25);
    // Resumed again: the rest of epoch 1 with the same sample order, dropout
    // stream and running loss, then epochs 2-3.
    const FitResult rest = run(config({"train.checkpoint_every_steps=3"}), out, /*resume=*/true);
    CHECK(rest.epochs() == 3);
    CHECK(weights_of(ckpt(out)) == want);
    const auto m = metrics_of(out);
    REQUIRE(m.size() == 4);
    // The stage's earlier time: epoch 0 and both parts of epoch 1 before
    // this process (recorded with epoch 1, apart from its own epoch_s).
    CHECK(m[1]["earlier_s"].get<double>() == both_parts);
    CHECK(rest.resumed_s == Approx(m[0]["epoch_s"].get<double>() + both_parts));
    for (size_t e = 0; e < 4; ++e) {
      CHECK(m[e]["train_loss"] == want_metrics[e]["train_loss"]);
      CHECK(m[e]["val_loss"] == want_metrics[e]["val_loss"]);
      // The continued epoch is partial: its steps are the 4 this process ran.
      const int64_t done_before = e == 1 ? 4 : 0;
      CHECK(m[e]["steps"].get<int64_t>() == want_metrics[e]["steps"].get<int64_t>() - done_before);
      CHECK(m[e].value("resumed_at_step", int64_t{0}) == done_before);
    }
  }
  SECTION("a mid-epoch resume records its epoch's learning rate under a step-based schedule") {
    const RunConfig cos = config({"schedule.type=cosine", "schedule.decay_steps=32", "train.checkpoint_every_steps=5"});
    const std::string whole = out_dir("res_cos_whole"), out = out_dir("res_cos_mid");
    run(cos, whole);
    TrainerOptions o;
    o.out_dir = out;
    o.progress = false;
    o.on_step = [](int64_t step) {
      if (step == 11) throw Thrown{};  // checkpoint at step 10: epoch 1 after 2 batches
    };
    {
      Trainer t(cos, world(), Device::cpu(), o);
      CHECK_THROWS_AS(t.fit(), Thrown);
    }
    run(cos, out, /*resume=*/true);
    const auto a = metrics_of(whole), b = metrics_of(out);
    REQUIRE(a.size() == 4);
    REQUIRE(b.size() == 4);
    for (size_t e = 0; e < 4; ++e) CHECK(b[e]["lr"] == a[e]["lr"]);  // epoch 1's too: its first step's
    CHECK(a[1]["lr"] != a[2]["lr"]);                                 // the schedule moves per step
    CHECK(weights_of(ckpt(out)) == weights_of(ckpt(whole)));
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
    const std::vector<std::string> rule = {"stop.plateau_threshold=10", "stop.plateau_patience=1", "stop.min_epochs=4",
                                           "stop.max_epochs=6"};
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

TEST_CASE("trainer: a non-finite loss stops with the epoch and step and keeps the last good checkpoint", "[trainer]") {
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
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("at epoch 0") && Catch::Contains("no checkpoint had been written yet"));
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
  SECTION("a run started with --init resumes without its init checkpoint") {
    // The resumed run takes every weight from its own checkpoint: the init
    // source may be gone (or retrained) by then.
    const std::string src2 = out_dir("init_src2"), whole = out_dir("init_whole"), cut = out_dir("init_cut");
    run(config({"stop.max_epochs=1", "train.seed=5"}), src2);
    const RunConfig from_src2 = config({"train.init=" + ckpt(src2), "stop.max_epochs=3"});
    run(from_src2, whole);
    CHECK_THROWS_AS(run(from_src2, cut, false,
                        [](const EpochRecord& r) {
                          if (r.epoch == 1) throw Thrown{};  // checkpoint: epoch 1 done
                        }),
                    Thrown);
    fs::remove_all(src2);
    const FitResult rest = run(from_src2, cut, /*resume=*/true);
    CHECK(rest.epochs() == 2);
    CHECK(weights_of(ckpt(cut)) == weights_of(ckpt(whole)));
  }
  SECTION("bottom only, frozen, from a coarse (T/2) run") {
    const std::string coarse = out_dir("init_coarse");
    run(config({"stop.max_epochs=1", "data.reduce=[2]"}), coarse);
    LoadedModel c = load_model_from_checkpoint(ckpt(coarse), Device::cpu());
    const std::string out = out_dir("init_bottom");
    TrainerOptions o;
    o.progress = false;
    o.out_dir = out;
    Trainer t(
        config({"train.init=" + ckpt(coarse), "train.init_groups=bottom", "train.freeze=bottom", "stop.max_epochs=1"}),
        world(), Device::cpu(), o);
    CHECK(group_bytes(t.model(), ParamGroup::Bottom) == group_bytes(*c.model, ParamGroup::Bottom));
    const std::string top0 = group_bytes(t.model(), ParamGroup::Top);
    t.fit();
    CHECK(group_bytes(t.model(), ParamGroup::Bottom) == group_bytes(*c.model, ParamGroup::Bottom));  // frozen
    CHECK(group_bytes(t.model(), ParamGroup::Top) != top0);                                          // trained
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
