// The trainer end to end on a small generated Neuron Inverter file (T = 64,
// 256 training samples, a 3-stage model with kernel 3 and pool 2 so that T/2
// still fits): metrics and checkpoint files, bit-identical determinism,
// the stop rules, BN re-calibration, warm-up. Checkpoints (kill-and-resume,
// NaN handling, --init/--freeze, foreign checkpoints):
// test_trainer_checkpoint.cpp. Every case takes well under a second or two.

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/communicator.h"
#include "core/error.h"
#include "data/formats.h"
#include "data/gen_neuron.h"
#include "fusion/bn_recalibrate.h"
#include "fusion/checkpoint.h"
#include "fusion/config.h"
#include "fusion/fuse.h"
#include "fusion/trainer.h"
#include "support/trainer_fixtures.h"

using namespace mrmf;

using namespace mrmf::test::trainer;

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
