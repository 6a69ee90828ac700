// Fusion copies exactly the intended blocks across resolutions; the stop
// rule fires exactly when it should; the concurrent split; experiment
// configuration errors. The experiment's state file and report:
// test_experiment_report.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "fusion/experiment_config.h"
#include "fusion/fuse.h"
#include "fusion/orchestrator.h"
#include "fusion/stop_rules.h"
#include "support/temp_dir.h"

using namespace mrmf;

namespace {
// `load` must throw a Config error whose message contains `needle`
// (`what`: the input, named if it is accepted).
template <class F>
void config_error(F&& load, const std::string& what, const std::string& needle) {
  try {
    load();
    FAIL("accepted: " << what);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK_THAT(std::string(e.what()), Catch::Contains(needle));
  }
}

ModelSpec ni_spec(int64_t T) {
  ModelSpec s;
  s.name = "neuron_inverter";
  s.sample_shape = Shape{3, T};
  return normalized(s);
}
std::unique_ptr<Model> built(const ModelSpec& s, uint64_t seed) {
  auto m = build_model(s);
  m->build(Device::cpu(), seed, default_init_scheme(s));
  // Distinct, recognisable buffer values (BN running statistics) per model.
  Tensor b = m->params().buffers();
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = static_cast<float>(seed) + 0.001f * static_cast<float>(i);
  return m;
}

// CosmoFlow (the authors' variant) at 8^3 (coarse) and 16^3 (dense).
std::pair<ModelSpec, ModelSpec> cosmoflow_8_16() {
  ModelSpec cs, ds;
  cs.name = ds.name = "cosmoflow";
  cs.sample_shape = Shape{4, 8, 8, 8};
  ds.sample_shape = Shape{4, 16, 16, 16};
  return {normalized(cs), normalized(ds)};
}
bool same(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.data<float>()[i] != b.data<float>()[i]) return false;
  return true;
}
}  // namespace

TEST_CASE("fusion: bottom from the coarse model, top (first FC included) from the dense one", "[fusion]") {
  const ModelSpec cs = ni_spec(800), ds = ni_spec(1600);
  auto coarse = built(cs, 11), dense = built(ds, 22);
  auto fused = fuse_models(*coarse, *dense, ds, Device::cpu(), 33);
  REQUIRE(fused->sample_shape() == ds.sample_shape);
  int bottom = 0, top = 0;
  for (const auto& e : fused->params().entries()) {
    const Tensor v = fused->params().value(fused->params().at(e.name));
    const Model& src = e.group == ParamGroup::Bottom ? *coarse : *dense;
    INFO(e.name);
    REQUIRE(same(v, src.params().value(src.params().at(e.name))));
    (e.group == ParamGroup::Bottom ? bottom : top)++;
  }
  REQUIRE(bottom > 0);
  REQUIRE(top > 0);
  // The first FC layer's shape depends on the resolution: it must be the dense one's.
  const ParamId fc0 = fused->params().at("fc_block.0.weight");
  REQUIRE(fused->params().info(fc0).shape == dense->params().info(dense->params().at("fc_block.0.weight")).shape);
  REQUIRE(fused->params().info(fc0).shape != coarse->params().info(coarse->params().at("fc_block.0.weight")).shape);
}

TEST_CASE("fusion: CosmoFlow BN running statistics travel with their layers", "[fusion]") {
  const auto [cs, ds] = cosmoflow_8_16();
  auto coarse = built(cs, 5), dense = built(ds, 6);
  auto fused = fuse_models(*coarse, *dense, ds, Device::cpu(), 7);
  int checked = 0;
  for (const auto& e : fused->params().entries()) {
    if (e.kind != ParamKind::Buffer) continue;
    const Model& src = e.group == ParamGroup::Bottom ? *coarse : *dense;
    INFO(e.name);
    REQUIRE(same(fused->params().value(fused->params().at(e.name)), src.params().value(src.params().at(e.name))));
    ++checked;
  }
  REQUIRE(checked > 0);
}

TEST_CASE("MRT transfer: bottom copied, top freshly initialised and untouched", "[fusion]") {
  const ModelSpec cs = ni_spec(400), ds = ni_spec(1600);
  auto coarse = built(cs, 1);
  auto fresh = build_model(ds);
  fresh->build(Device::cpu(), 99, default_init_scheme(ds));
  auto t = transfer_bottom(*coarse, ds, Device::cpu(), 99);
  for (const auto& e : t->params().entries()) {
    if (e.kind != ParamKind::Param) continue;
    const Model& src = e.group == ParamGroup::Bottom ? *coarse : *fresh;
    INFO(e.name);
    REQUIRE(same(t->params().value(t->params().at(e.name)), src.params().value(src.params().at(e.name))));
  }
}

TEST_CASE("MRT transfer: BN running statistics travel with the bottom (CosmoFlow)", "[fusion]") {
  const auto [cs, ds] = cosmoflow_8_16();
  auto coarse = built(cs, 5);  // buffers randomised: a copy is told apart from a fresh model
  auto fresh = build_model(ds);
  fresh->build(Device::cpu(), 99, default_init_scheme(ds));
  auto t = transfer_bottom(*coarse, ds, Device::cpu(), 99);
  int checked = 0;
  for (const auto& e : t->params().entries()) {
    const Model& src = e.group == ParamGroup::Bottom ? *coarse : *fresh;
    INFO(e.name);
    REQUIRE(same(t->params().value(t->params().at(e.name)), src.params().value(src.params().at(e.name))));
    checked += e.kind == ParamKind::Buffer && e.group == ParamGroup::Bottom;
  }
  REQUIRE(checked >= 8);  // input BN + 7 conv BNs: mean and var each
  REQUIRE_FALSE(same(t->params().buffers(), fresh->params().buffers()));
}

TEST_CASE("fusion: incompatible models are refused with the offending names", "[fusion]") {
  const ModelSpec a = ni_spec(1600);
  ModelSpec other = a;
  other.options["conv_channels"] = "30,90,200";
  other = normalized(other);
  auto m1 = built(a, 1), m2 = built(other, 2);
  REQUIRE_THROWS_WITH(fuse_models(*m2, *m1, a, Device::cpu(), 3), Catch::Contains("cnn_block.6.weight"));
}

TEST_CASE("stop rule: the plateau fires exactly after T_p small reductions in a row", "[fusion][stop]") {
  PlateauRule r(0.01, 3);
  // reductions: -, 0.1, 0.005, 0.002, 0.05 (resets), 0.001, 0.0, 0.009 -> fires at the 8th epoch
  const double losses[] = {1.0, 0.9, 0.895, 0.893, 0.843, 0.842, 0.842, 0.833};
  std::vector<bool> fired;
  for (double l : losses) fired.push_back(r.update(l));
  REQUIRE(fired == std::vector<bool>{false, false, false, false, false, false, false, true});
  // A loss that goes up counts as no reduction.
  PlateauRule up(0.01, 2);
  REQUIRE_FALSE(up.update(1.0));
  REQUIRE_FALSE(up.update(1.2));
  REQUIRE(up.update(1.3));
  // Disabled rule never fires.
  PlateauRule off(0.0, 0);
  for (int i = 0; i < 10; ++i) REQUIRE_FALSE(off.update(1.0));
  // Whether it can fire within a guard: first after patience + 1 epochs, not
  // before min_epochs; the largest patience did not wrap (session 57).
  CHECK(r.can_fire_within(4));
  CHECK_FALSE(r.can_fire_within(3));
  CHECK_FALSE(PlateauRule(0.01, 3, 6).can_fire_within(5));
  CHECK(PlateauRule(0.01, 3, 6).can_fire_within(6));
  CHECK_FALSE(PlateauRule(0.01, std::numeric_limits<int64_t>::max()).can_fire_within(1000));
  CHECK(off.can_fire_within(1));
}

TEST_CASE("stop rule: against the best, a flat but noisy loss is a plateau", "[fusion][stop]") {
  // Session 25's 32^3 coarse stage in shape: flat near 0.19, each epoch
  // 0.002-0.008 up or down. From the epoch before, every drop after a rise
  // resets the count (threshold 0.005, patience 3): it never fires. From the
  // best so far (0.190 after epoch 2), no epoch gets 0.005 below it.
  const double losses[] = {0.30, 0.20, 0.190, 0.196, 0.189, 0.195, 0.188, 0.194, 0.187};
  PlateauRule prev(0.005, 3), best(0.005, 3, 0, /*against_best=*/true);
  std::vector<bool> fired_prev, fired_best;
  for (double l : losses) {
    fired_prev.push_back(prev.update(l));
    fired_best.push_back(best.update(l));
  }
  CHECK(fired_prev == std::vector<bool>(9, false));
  // Reductions from the best: -, 0.1 (best 0.20), 0.01 (0.190), -0.006, 0.001 (0.189), -0.006, 0.001
  // (0.188): three small ones in a row after epoch 5 -> fires at the 6th epoch (index 5).
  CHECK(fired_best == std::vector<bool>{false, false, false, false, false, true, true, true, true});
  CHECK(best.previous() == 0.187);  // the best so far: what a checkpoint keeps
  // A real drop resets the count against the best too.
  PlateauRule again(0.005, 3, 0, true);
  for (double l : {1.0, 0.999, 0.998, 0.5, 0.499, 0.4995}) CHECK_FALSE(again.update(l));
  CHECK(again.update(0.499));
  // Restored from a checkpoint: the reference is the saved best.
  PlateauRule resumed(0.005, 1, 0, true);
  resumed.restore(0, true, 0.187, 9);
  CHECK(resumed.update(0.19));  // above the best: no reduction
  CHECK_FALSE(resumed.update(0.18));  // 0.007 below it
}

TEST_CASE("stop rule: min_epochs holds the plateau back, counting the epochs before it", "[fusion][stop]") {
  // Flat from the start: patience 1 would fire at the 2nd epoch; min_epochs
  // 4 makes it the 4th (the small reductions before it counted).
  PlateauRule flat(0.01, 1, 4);
  const double flat_losses[] = {1.0, 0.999, 0.998, 0.997, 0.996};
  std::vector<bool> fired;
  for (double l : flat_losses) fired.push_back(flat.update(l));
  REQUIRE(fired == std::vector<bool>{false, false, false, true, true});
  // An early flat stretch that ends before min_epochs does not stop the
  // run: the reduction at epoch 4 resets the count, the rule waits for two
  // new small reductions (epochs 5 and 6).
  PlateauRule early(0.01, 2, 4);
  const double early_losses[] = {1.0, 0.999, 0.998, 0.5, 0.499, 0.498};
  fired.clear();
  for (double l : early_losses) fired.push_back(early.update(l));
  REQUIRE(fired == std::vector<bool>{false, false, false, false, false, true});
  // Restored from a checkpoint after 2 epochs: the epochs already run count.
  PlateauRule resumed(0.01, 1, 4);
  resumed.restore(1, true, 0.998, 2);
  REQUIRE_FALSE(resumed.fired());
  REQUIRE_FALSE(resumed.update(0.997));  // 3rd epoch
  REQUIRE(resumed.update(0.996));        // 4th
}

TEST_CASE("concurrent split: groups sized by epoch times, never empty", "[fusion]") {
  // Paper: 32 GPUs, 20 dense / 12 coarse.
  REQUIRE(Orchestrator::dense_group_size(32, 20, 12) == 20);
  REQUIRE(Orchestrator::dense_group_size(2, 100, 1) == 1);
  REQUIRE(Orchestrator::dense_group_size(2, 1, 100) == 1);
  REQUIRE(Orchestrator::dense_group_size(3, 2, 1) == 2);
  REQUIRE_THROWS_WITH(Orchestrator::dense_group_size(1, 1, 1), Catch::Contains("at least two ranks"));
}

TEST_CASE("concurrent split: each group's epoch and guard-bound stage time, and a notice when ranks are too few",
          "[fusion]") {
  StageStops stops;
  stops.dense.max_epochs = 3;
  stops.coarse.max_epochs = 10;
  std::string summary;
  // Session 14's probe on 2 ranks: dense 12 s, coarse 6 s per all-rank epoch;
  // one rank each doubles both, and the dense epochs are 2x the coarse ones.
  const std::string n2 = Orchestrator::split_balance_notice(2, 1, 12, 6, stops, &summary);
  CHECK_THAT(summary, Catch::Contains("dense group 1 rank(s): ~24.00 s per epoch, <= 72.0 s at its 3-epoch guard"));
  CHECK_THAT(summary, Catch::Contains("coarse group 1 rank(s): ~12.00 s per epoch, <= 120.0 s at its 10-epoch guard"));
  CHECK_THAT(n2, Catch::Contains("2 ranks cannot follow the epoch times (ideal 1.33 dense : 0.67 coarse)"));
  CHECK_THAT(n2, Catch::Contains("a dense epoch will take 2.0x a coarse one, so the coarse group waits"));
  // The paper's 32 GPUs split 20 : 12 by the same times: epochs within 1.5x, no notice.
  const int nd = Orchestrator::dense_group_size(32, 20, 12);
  CHECK(Orchestrator::split_balance_notice(32, nd, 20, 12, stops, &summary).empty());
  CHECK_THAT(summary, Catch::Contains("dense group 20 rank(s): ~32.00 s per epoch"));
  CHECK_THAT(summary, Catch::Contains("coarse group 12 rank(s): ~32.00 s per epoch"));
  // The other way round: a coarse epoch slower than a dense one.
  CHECK_THAT(Orchestrator::split_balance_notice(3, 1, 1, 4, stops),
             Catch::Contains("a coarse epoch will take 2.0x a dense one, so the dense group waits"));
  REQUIRE_THROWS_WITH(Orchestrator::split_balance_notice(2, 2, 1, 1, stops), Catch::Contains("leaves a group empty"));
}

TEST_CASE("experiment config: bad input is reported before any training", "[fusion][config]") {
  const std::string run = "run: {data: {path: x.h5}}\n";
  auto fails = [&](const std::string& exp, const std::string& needle) {
    config_error([&] { parse_experiment_config(run + exp, {}, "exp.yaml"); }, exp, needle);
  };
  fails("experiment: {target_val_loss: 0.1, ladder: [[2], [4]]}", "last rung must be the original");
  fails("experiment: {target_val_loss: 0.1, ladder: [[2], [4], [1]]}", "[2] is followed by [4], which is not finer");
  fails("experiment: {target_val_loss: 0.1, ladder: [[2, 2, 2], [2, 2, 2], [1]]}", "not finer");
  fails("experiment: {target_val_loss: 0.1, methods: [mrmf3], ladder: [[2], [1]]}", "needs 4 rungs");
  fails("experiment: {target_val_loss: 0.1, methods: [magic]}", "'magic' is not one of");
  fails("experiment: {target_val_loss: 0.1, methods: [baseline, mrt, baseline]}", "'baseline' is given twice");
  fails("experiment: {target_val_loss: 0.1, seeds: [1, 2, 1]}", "'seeds': 1 is given twice");
  fails("experiment: {methods: [baseline]}", "target_val_loss");
  fails("experiment: {target_val_loss: 0.1, coarse_stop: {threshold: 0.1, patience: 0}}", "patience");
  fails("experiment: {target_val_loss: 0.1, colour: red}", "unknown experiment key 'colour'");
  fails(
      "experiment: {target_val_loss: 0.1, methods: [baseline, mrmf1], ladder: [[2], [1]], resolution_overrides: "
      "{\"2\": [train.batch_size]}}",
      "experiment key 'resolution_overrides' (rung 2): --set 'train.batch_size': expected key=value");
  fails("experiment: {target_val_loss: 0.1, coarse_stop: {min_epochs: -1}}", "'coarse_stop.min_epochs': must be >= 0");
  fails("experiment: {target_val_loss: 0.1, dense_stop: {min_epoch: 3}}",
        "unknown experiment key 'dense_stop.min_epoch' (expected threshold, patience, max_epochs, min_epochs, "
        "reference)");
  fails("experiment: {target_val_loss: 0.1, coarse_stop: {reference: lowest}}",
        "'coarse_stop.reference': 'lowest' is not one of previous, best");
  fails("experiment: {target_val_loss: 0.1, resolution_overrides: {\"8\": [\"train.batch_size=2\"]}}",
        "'8' is not a rung of the ladder (its rungs: '4', '2', '1')");
  fails(
      "experiment: {target_val_loss: 0.1, methods: [mrt], ladder: [[2, 2, 2], [1]], resolution_overrides: {\"2,2,1\": "
      "[]}}",
      "'2,2,1' is not a rung of the ladder (its rungs: '2,2,2', '1')");
  fails(
      "experiment: {target_val_loss: 0.1, methods: [mrt], ladder: [[2, 2, 2], [1]], resolution_overrides: {\"2\": [], "
      "\"2,2,2\": []}}",
      "'2' and '2,2,2' name the same rung [2,2,2]; give its overrides under one key");
  fails("experiment: {target_val_loss: 0.1, resolution_overrides: {\"2\": [\"train.batch_size=0\"]}}",
        "train.batch_size");
  fails("experiment: {target_val_loss: 0.1, concurrent_times: [1]}", "concurrent_times");
  fails("experiment: {target_val_loss: 0.1, bn_recalibration_batches: -2}", "'bn_recalibration_batches': must be >= 0");
  fails("experiment: {target_val_loss: 0.1, bn_recalibration_batches: many}", "'bn_recalibration_batches': wrong type");
  // Numbers that are not finite, and lists of the wrong shape (found by an audit: accepted, then failing after
  // training or silently ignored).
  fails("experiment: {target_val_loss: .inf}", "'target_val_loss': must be a finite positive number");
  fails("experiment: {target_val_loss: 0.1, dense_stop: {threshold: .inf, patience: 1}}",
        "'dense_stop.threshold': must be a finite number >= 0");
  fails("experiment: {target_val_loss: 0.1, concurrent_times: [.inf, 1]}", "both finite and positive");
  fails("experiment: {target_val_loss: 0.1, ladder: [[2], [1]], stages: [{}, {}]}",
        "'stages': 2 entries, but the ladder's 2 rungs make at most 1 fusion stage(s)");
  fails("experiment: {target_val_loss: 0.1, stages: 5}", "'stages': expected a list");
  fails("experiment: {target_val_loss: 0.1, stages: [5]}", "'stages[0]': expected a map");
  fails("experiment: {target_val_loss: 0.1, ladder: {a: 1, b: 2}}", "'ladder': expected a list");
  // One spelling per method; mrmf0 is no method at all.
  fails("experiment: {target_val_loss: 0.1, methods: [mrmf1, mrmf01]}", "'mrmf01' is not one of");
  fails("experiment: {target_val_loss: 0.1, methods: [mrmf0]}", "'mrmf0' is not one of");
  // Keys the experiment sets per stage cannot be overridden (they were replaced silently).
  fails("experiment: {target_val_loss: 0.1, resolution_overrides: {\"2\": [\"stop.max_epochs=50\"]}}",
        "the experiment sets 'stop.max_epochs' in every stage");
  fails("experiment: {target_val_loss: 0.1, resolution_overrides: {\"1\": [\"data.reduce=[2]\"]}}",
        "the experiment sets 'data.reduce'");
  // Fine-tuning overrides: run keys, checked like the rest, not the experiment's own nor the model's or data's.
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"schedule.warmup_steps=-4\"]}",
        "'schedule.warmup_steps': must be >= 0, got -4");
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"stop.max_epochs=3\"]}",
        "experiment key 'finetune_overrides': 'stop.max_epochs=3': the experiment sets 'stop.max_epochs'");
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"model.options.dropout=0.5\"]}",
        "the fine-tuned model is the fused or transferred one");
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"data.layout=reinterpret\"]}",
        "set 'data.layout' for every stage");
  // Their advice was to put these keys in resolution_overrides, where they
  // were silently ignored (session 57).
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"runtime.threads=1\"]}",
        "give runtime keys with --set, for the whole experiment");
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"train.init=x.h5\"]}", "does not read train.init");
  fails("experiment: {target_val_loss: 0.1, resolution_overrides: {\"2\": [\"runtime.device=cuda\"]}}",
        "(rung 2): 'runtime.device=cuda': the device and threads are chosen once");
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: [\"train={init: x.h5}\"]}",
        "the experiment sets 'train'");
  // A whole section would replace the stages' train.seed / data.reduce (from a review, session 51).
  fails("experiment: {target_val_loss: 0.1, resolution_overrides: {\"2\": [\"data={path: d.h5}\"]}}",
        "the experiment sets 'data' in every stage");
  fails("experiment: {target_val_loss: 0.1, optimizer_at_fusion: keep, finetune_overrides: [\"optimizer.name=sgd\"]}",
        "changes the optimizer whose state optimizer_at_fusion: keep carries");
  // ... nor on one rung (its state fails to travel at the first fusion, after
  // the pre-fusion stages have trained); with reset it may.
  fails(
      "experiment: {target_val_loss: 0.1, optimizer_at_fusion: keep, resolution_overrides: {\"2\": "
      "[\"optimizer.momentum=0\"]}}",
      "'optimizer.momentum=0' (rung 2) changes the optimizer whose state optimizer_at_fusion: keep carries");
  CHECK_NOTHROW(parse_experiment_config(
      run + "experiment: {target_val_loss: 0.1, resolution_overrides: {\"2\": [\"optimizer.momentum=0\"]}}", {},
      "exp.yaml"));
  // A run-config error of the fine-tuning stages is named as the overrides' (here two warmups).
  fails(
      "experiment: {target_val_loss: 0.1, finetune_overrides: [\"schedule.warmup_steps=8\", "
      "\"schedule.warmup_epochs=2\"]}",
      "experiment key 'finetune_overrides': the fine-tuning stages' run configuration");
  fails("experiment: {target_val_loss: 0.1, finetune_overrides: \"schedule.warmup_steps=4\"}", "finetune_overrides");
  config_error(
      [&] { parse_experiment_config(run + "experiment: {target_val_loss: 0.1}", {"train.epochs=5"}, "exp.yaml"); },
      "--set train.epochs", "the experiment sets 'train.epochs'");
  config_error([&] { parse_experiment_config("experiment: {target_val_loss: 0.1}", {}, "exp.yaml"); }, "no run",
               "exp.yaml: no run configuration: give 'run' (inline) or 'base'");
  config_error(
      [&] {
        parse_experiment_config(run + "experiment: {target_val_loss: 0.1}\nexperiment: {seeds: [2]}", {}, "exp.yaml");
      },
      "twice", "exp.yaml: key 'experiment' is given twice");
  const ExperimentConfig ok = parse_experiment_config(
      run + "experiment: {target_val_loss: 0.1, methods: [baseline, mrt, mrmf1, mrmf2], ladder: [[4], [2], [1]]}", {},
      "exp.yaml");
  REQUIRE(ok.ladder_for("mrmf2").size() == 3);
  REQUIRE(ok.bn_recalibration_batches == 0);  // off by default: the paper's method
  REQUIRE(ok.ladder_for("mrmf1") == std::vector<Resolution>{{2}, {1}});
  REQUIRE(ok.ladder_for("mrt") == std::vector<Resolution>{{2}, {1}});
  REQUIRE_FALSE(ok.shared_init);  // each dense model draws its own initial weights by default
  fails("experiment: {target_val_loss: 0.1, shared_init: sometimes}", "'shared_init': wrong type");
  fails("experiment: {target_val_loss: 0.1, stage_checkpoints: maybe}", "'stage_checkpoints': wrong type");
  REQUIRE(ok.stage_checkpoints);  // on by default: --resume continues inside a stage
  REQUIRE_FALSE(parse_experiment_config(run + "experiment: {target_val_loss: 0.1, stage_checkpoints: false}", {},
                                        "exp.yaml")
                    .stage_checkpoints);
  REQUIRE(parse_experiment_config(run + "experiment: {target_val_loss: 0.1, shared_init: true}", {}, "exp.yaml")
              .shared_init);
}

TEST_CASE("experiment config: a rung's overrides under either spelling of one factor on every axis",
          "[fusion][config]") {
  CHECK(names_rung("2", {2, 2, 2}));
  CHECK(names_rung("2,2,2", {2}));
  CHECK(names_rung("2, 2, 2", {2, 2, 2}));
  CHECK(names_rung("1", {1, 1, 1}));
  CHECK(names_rung("1,1,2", {1, 1, 2}));
  CHECK_FALSE(names_rung("2", {1, 1, 2}));
  CHECK_FALSE(names_rung("2,2,1", {2}));
  CHECK_FALSE(names_rung("4", {2, 2, 2}));
  CHECK_FALSE(names_rung("two", {2}));
  CHECK_FALSE(names_rung("2x", {2}));
  // The ladder writes [2, 2, 2] and 1; the overrides name them "2" and "1,1,1".
  const ExperimentConfig c = parse_experiment_config(
      "run: {data: {path: x.h5}}\nexperiment: {target_val_loss: 0.1, ladder: [[4, 4, 4], [2, 2, 2], 1], "
      "resolution_overrides: {\"2\": [\"train.batch_size=3\"], \"1,1,1\": [\"optimizer.lr=0.5\"]}}",
      {}, "exp.yaml");
  REQUIRE(rung_overrides(c, c.ladder[1]) != nullptr);
  CHECK(*rung_overrides(c, c.ladder[1]) == std::vector<std::string>{"train.batch_size=3"});
  REQUIRE(rung_overrides(c, c.ladder[2]) != nullptr);
  CHECK(*rung_overrides(c, c.ladder[2]) == std::vector<std::string>{"optimizer.lr=0.5"});
  CHECK(rung_overrides(c, c.ladder[0]) == nullptr);
}

TEST_CASE("experiment config: an experiment file as the base of another", "[fusion][config]") {
  test::TempDir tmp("mrmf_exp_base");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(tmp / name).parent_path());
    std::ofstream(tmp / name) << text;
  };
  // The parent names its run configuration relative to its own folder.
  write("runs/run.yaml", "data: {path: x.h5}\ntrain: {batch_size: 16}\n");
  write("runs/parent.yaml",
        "base: run.yaml\nexperiment: {target_val_loss: 0.1, methods: [baseline, mrt, mrmf1], ladder: [[4], [2], [1]],\n"
        "  coarse_stop: {threshold: 0.01, patience: 2, max_epochs: 9}, dense_stop: {max_epochs: 3}}\n");
  write("child.yaml", "base: runs/parent.yaml\nexperiment: {methods: [mrt], coarse_stop: {patience: 5}}\n");
  const ExperimentConfig c = load_experiment_config(tmp / "child.yaml", {"experiment.max_epochs=7"});
  CHECK(c.methods == std::vector<std::string>{"mrt"});  // set here: replaces the parent's
  CHECK(c.target_val_loss == 0.1);                      // inherited
  CHECK(c.ladder.size() == 3);
  CHECK(c.max_epochs == 7);  // --set applies to the merged experiment
  // A key set here replaces the inherited value whole: the parent's
  // threshold and max_epochs do not carry into the child's coarse_stop.
  CHECK(c.coarse_stop.patience == 5);
  CHECK(c.coarse_stop.threshold == ExperimentConfig{}.coarse_stop.threshold);
  CHECK(c.coarse_stop.max_epochs == ExperimentConfig{}.coarse_stop.max_epochs);
  CHECK(c.dense_stop.max_epochs == 3);
  CHECK_THAT(c.run_yaml, Catch::Contains("batch_size: 16"));

  const auto fails = [&](const std::string& file, const std::string& needle) {
    config_error([&] { load_experiment_config(tmp / file, {}); }, file, needle);
  };
  write("self.yaml", "base: self.yaml\nexperiment: {target_val_loss: 0.1}\n");
  fails("self.yaml", "more than 8 experiment files chained by 'base'");
  write("lost.yaml", "base: runs/missing.yaml\nexperiment: {target_val_loss: 0.1}\n");
  fails("lost.yaml",
        "cannot read the base of " + (tmp / "lost.yaml") + " '" + (tmp / "runs/missing.yaml") + "': no such file");
  write("runs/odd.yaml", "base: run.yaml\nexperiment: {target_val_loss: 0.1}\ncolour: red\n");
  write("odd_child.yaml", "base: runs/odd.yaml\nexperiment: {methods: [mrt]}\n");
  fails("odd_child.yaml", "odd.yaml: unknown section 'colour'");
  write("dir_base.yaml", "base: runs\nexperiment: {target_val_loss: 0.1}\n");
  fails("dir_base.yaml", "'base' names the folder");
  write("null_base.yaml", "base:\nexperiment: {target_val_loss: 0.1}\n");
  fails("null_base.yaml", "'base' has no value");
}

TEST_CASE("shared_init: the same seed gives coarse and dense models identical convolutions", "[fusion]") {
  // What experiment.shared_init relies on: initial values are drawn per
  // parameter from its offset in the flat store, and the bottom's offsets do
  // not depend on the resolution -- so one seed, two resolutions, same bottom.
  for (const auto& [cs, ds] : {std::make_pair(ni_spec(400), ni_spec(1600)), cosmoflow_8_16()}) {
    auto c = build_model(cs), d = build_model(ds), other = build_model(ds);
    c->build(Device::cpu(), 7, default_init_scheme(cs));
    d->build(Device::cpu(), 7, default_init_scheme(ds));
    other->build(Device::cpu(), 1007, default_init_scheme(ds));
    int bottom = 0;
    for (const auto& e : c->params().entries()) {
      if (e.group != ParamGroup::Bottom || e.kind != ParamKind::Param) continue;
      INFO(e.name);
      const Tensor a = c->params().value(c->params().at(e.name));
      REQUIRE(same(a, d->params().value(d->params().at(e.name))));
      if (a.ndim() < 2) continue;  // BN scales and shifts start at 1 and 0 whatever the seed
      REQUIRE_FALSE(same(a, other->params().value(other->params().at(e.name))));
      ++bottom;
    }
    REQUIRE(bottom >= 3);  // the conv weights: 3 (Neuron Inverter), 7 (CosmoFlow)
  }
}
