// Runs under mpiexec -n 2 and -n 3: the concurrent split's parameter
// exchange gives every rank the same fused model, and a tiny end-to-end MRMF
// experiment (every method, concurrent included) completes and reports.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cmath>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/communicator.h"
#include "data/gen_neuron.h"
#include "fusion/bn_recalibrate.h"
#include "fusion/fuse.h"
#include "fusion/trainer.h"
#include "fusion/report.h"

using namespace mrmf;
namespace fs = std::filesystem;

namespace {
ModelSpec ni_spec(int64_t T) {
  ModelSpec s;
  s.name = "neuron_inverter";
  s.sample_shape = Shape{3, T};
  return normalized(s);
}
std::unique_ptr<Model> built(const ModelSpec& s, uint64_t seed) {
  auto m = build_model(s);
  m->build(Device::cpu(), seed, default_init_scheme(s));
  Tensor b = m->params().buffers();
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = static_cast<float>(seed) + 0.5f * static_cast<float>(i % 7);
  return m;
}
// A fresh folder `<tmp>/<name>_<ranks>_<launcher pid>` holding a generated
// Neuron Inverter file ni.h5, made by rank 0 while the others wait.
fs::path folder_with_ni_file(const Communicator& world, const std::string& name, data::NeuronGenOptions g) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(world.size()) + "_" +
                                                    std::to_string(::getppid()));
  if (world.is_root()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    g.threads = 1;
    data::generate_neuron_inverter((dir / "ni.h5").string(), g);
  }
  world.barrier();
  return dir;
}

// A tiny BN-carrying Neuron Inverter run (64 training and 16 validation
// samples per rank, T = 64) in a fresh folder; `extra` adds YAML lines.
std::pair<fs::path, RunConfig> tiny_bn_run(const Communicator& world, const std::string& name, uint64_t seed,
                                           const std::string& extra = "") {
  data::NeuronGenOptions g;
  g.train = 64 * world.size();
  g.val = 16 * world.size();
  g.test = 16;
  g.seed = seed;
  g.time_bins = 64;
  g.zscore_samples = 64;
  const fs::path dir = folder_with_ni_file(world, name, g);
  RunConfig rc = parse_run_config(
      "model: {name: neuron_inverter, options: {conv_channels: '4,8', kernel: 3, pool: 2, fc: '16'}}\n"
      "data: {format: neuron_inverter, path: '" + (dir / "ni.h5").string() + "'}\n"
      "train: {batch_size: 16, seed: 2}\nruntime: {device: cpu, threads: 1}\n" + extra, {});
  return {dir, rc};
}

// A concurrent experiment (ladder 1/4 -> 1, seed 1, batch 16) on a fresh
// Neuron Inverter file of `train` / `val` samples per rank, its coarse stage
// one epoch, its dense stage `dense_epochs` (threshold 0: the plateau rules
// off); `keys` adds experiment keys (concurrent_times, ...).
std::pair<fs::path, ExperimentConfig> concurrent_experiment(const Communicator& world, const std::string& name,
                                                            uint64_t data_seed, int64_t train, int64_t val,
                                                            int dense_epochs, const std::string& keys) {
  data::NeuronGenOptions g;
  g.train = train * world.size();
  g.val = val * world.size();
  g.test = 16;
  g.seed = data_seed;
  const fs::path dir = folder_with_ni_file(world, name, g);
  const std::string yaml = "run:\n  data: {path: " + (dir / "ni.h5").string() +
                           "}\n  train: {batch_size: 16}\n  schedule: {type: constant}\n"
                           "experiment:\n  methods: [concurrent]\n  seeds: [1]\n"
                           "  target_val_loss: 0.01\n  max_epochs: 1\n  ladder: [[4], [1]]\n" +
                           keys;
  const std::string stops =
      "  coarse_stop: {threshold: 0.0, patience: 1, max_epochs: 1}\n"
      "  dense_stop: {threshold: 0.0, patience: 1, max_epochs: " +
      std::to_string(dense_epochs) + "}\n";
  return {dir, parse_experiment_config(yaml + stops, {"runtime.threads=1"}, name + ".yaml")};
}
}  // namespace

TEST_CASE("concurrent exchange: every rank holds bottom(M_c) + top(M_d)", "[mpi][fusion]") {
  Communicator world = Communicator::world();
  const int coarse_root = world.size() - 1;  // dense group: ranks [0, n-1), coarse group: the last rank
  const ModelSpec cs = ni_spec(800), ds = ni_spec(1600);
  const bool dense = world.rank() < coarse_root;
  // Each group's model; the other group's ranks must not influence the result.
  auto mine = dense ? built(ds, 22) : built(cs, 11);
  auto fused = exchange_and_fuse(world, coarse_root, std::move(mine), cs, ds, Device::cpu(), 5);
  auto ref_c = built(cs, 11), ref_d = built(ds, 22);
  for (const auto& e : fused->params().entries()) {
    const Model& src = e.group == ParamGroup::Bottom ? *ref_c : *ref_d;
    const Tensor a = fused->params().value(fused->params().at(e.name)), b = src.params().value(src.params().at(e.name));
    INFO("rank " << world.rank() << " " << e.name);
    for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.data<float>()[i] == b.data<float>()[i]);
  }
}

TEST_CASE("concurrent exchange: a dense model unlike the other group's skeleton of it is an error on every rank",
          "[mpi][fusion]") {
  Communicator world = Communicator::world();
  const int coarse_root = world.size() - 1;
  const ModelSpec cs = ni_spec(800), ds = ni_spec(1600), other = ni_spec(1200);
  const bool dense = world.rank() < coarse_root;
  // The dense group trained a model of another size than the spec every
  // rank was given: the broadcasts' byte counts would disagree.
  auto mine = dense ? built(other, 22) : built(cs, 11);
  try {
    (void)exchange_and_fuse(world, coarse_root, std::move(mine), cs, ds, Device::cpu(), 5);
    FAIL("no error on rank " << world.rank());
  } catch (const Error& e) {
    INFO(e.what());
    CHECK_THAT(e.message(), Catch::Contains("ranks disagree on the dense model's layout at the concurrent exchange"));
  }
}

TEST_CASE("experiment: a tiny end-to-end MRMF run with every method", "[mpi][experiment]") {
  Communicator world = Communicator::world();
  data::NeuronGenOptions g;
  g.train = 192;
  g.val = 96;
  g.test = 48;
  g.seed = 3;
  const fs::path dir = folder_with_ni_file(world, "mrmf_mpi_exp", g);
  const std::string yaml = "run:\n  data: {path: " + (dir / "ni.h5").string() +
                           "}\n  train: {batch_size: 16}\n  schedule: {type: constant}\n  stop: {max_epochs: 2}\n"
                           "experiment:\n  methods: [baseline, mrt, mrmf1, mrmf2, concurrent]\n  seeds: [1]\n"
                           "  target_val_loss: 0.01\n  max_epochs: 2\n  ladder: [[4], [2], [1]]\n"
                           "  coarse_stop: {threshold: 0.5, patience: 1, max_epochs: 2}\n"
                           "  dense_stop: {threshold: 0.5, patience: 1, max_epochs: 1}\n"
                           "  concurrent_times: [2.0, 1.0]\n  bn_recalibration_batches: 2\n";
  const ExperimentConfig cfg = parse_experiment_config(yaml, {"runtime.threads=1"}, "tiny.yaml");
  Orchestrator orch(cfg, world, Device::cpu(), (dir / "out").string());
  std::vector<MethodRun> runs;
  for (const auto& m : cfg.methods) runs.push_back(orch.run(m, 1));
  for (const auto& r : runs) {
    INFO(r.method);
    REQUIRE(!r.stages.empty());
    REQUIRE(r.total_s > 0);
    REQUIRE(std::isfinite(r.final_val_loss));
    REQUIRE(r.stages.back().epochs >= 1);
  }
  const auto& conc = runs.back();
  REQUIRE(conc.stages.size() == 3);  // coarse group, dense group, fine-tuning on all ranks
  if (world.size() > 1) CHECK(conc.split_probe_s == 0);  // concurrent_times given: nothing probed
  REQUIRE(conc.stages[0].ranks + conc.stages[1].ranks == world.size());
  REQUIRE(runs[3].stages.size() == 5);  // mrmf2: 2 x (coarse, dense) + fine-tuning
  REQUIRE(runs[3].epochs_before_fusion >= 4);
  if (world.is_root()) {
    ReportContext ctx;
    ctx.title = "tiny";
    ctx.ranks = world.size();
    ctx.device = "cpu";
    ctx.target_val_loss = cfg.target_val_loss;
    const std::string md = write_report((dir / "out").string(), runs, ctx);
    REQUIRE_THAT(md, Catch::Contains("MRMF (one fusion)") && Catch::Contains("Improvement over baseline"));
    auto j = nlohmann::json::parse(std::ifstream(dir / "out" / "summary.json"));
    REQUIRE(j["runs"].size() == 5);
    REQUIRE(j["methods"].contains("concurrent"));
    REQUIRE(fs::exists(dir / "out" / "chart.svg"));
    REQUIRE(fs::exists(dir / "out" / "mrmf2" / "seed1" / "stage2_dense" / "metrics.jsonl"));
    // The per-epoch breakdown on all ranks: gradients were averaged, so some
    // communication was left after backward (the last bucket is launched
    // when backward ends); every column is within the epoch's wall time.
    std::ifstream in(dir / "out" / "baseline" / "seed1" / "baseline" / "metrics.jsonl");
    int epochs = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto e = nlohmann::json::parse(line);
      ++epochs;
      CHECK(e["comm_s"].get<double>() > 0);
      CHECK(e["comm_in_flight_s"].get<double>() >= e["comm_s"].get<double>());
      CHECK(e["compute_s"].get<double>() > 0);
      // (Each column is the maximum over ranks, so only each one alone is bounded.)
      for (const char* k : {"io_s", "compute_s", "comm_s", "comm_in_flight_s", "val_s"})
        CHECK(e[k].get<double>() <= e["epoch_s"].get<double>() * 1.001 + 1e-4);
    }
    CHECK(epochs > 0);
  }
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("experiment: concurrent training sizes its groups with a timing probe", "[mpi][experiment]") {
  Communicator world = Communicator::world();
  const auto [dir, cfg] = concurrent_experiment(world, "mrmf_mpi_probe", 4, 96, 32, 1, "  probe_steps: 1\n");
  REQUIRE(cfg.concurrent_times.empty());  // measured, not given
  Orchestrator orch(cfg, world, Device::cpu(), (dir / "out").string());
  const MethodRun r = orch.run("concurrent", 1);
  REQUIRE(r.concurrent_groups);
  REQUIRE(r.stages.size() == 3);
  const int dense = r.stages[1].ranks, coarse = r.stages[0].ranks;
  CHECK(dense + coarse == world.size());
  CHECK(dense >= 1);
  CHECK(coarse >= 1);
  // The split follows the probe's measured times (recorded in split.json):
  // proportional, so the group with the longer epoch is never the smaller.
  // (Not "dense >= coarse" outright: on an oversubscribed CI machine a
  // one-step probe of the 1/4-resolution model can measure slower.)
  fs::path record;
  for (const auto& e : fs::recursive_directory_iterator(dir / "out"))
    if (e.path().filename() == "split.json") record = e.path();
  REQUIRE(!record.empty());
  const auto split = nlohmann::json::parse(std::ifstream(record));
  const double t_dense = split["t_dense"].get<double>(), t_coarse = split["t_coarse"].get<double>();
  CHECK(split["dense_ranks"].get<int>() == dense);
  CHECK(dense == Orchestrator::dense_group_size(world.size(), t_dense, t_coarse));
  if (t_dense >= t_coarse) CHECK(dense >= coarse);
  CHECK(r.stages[2].ranks == world.size());  // fine-tuning on every rank
  // The probe's time is the method's: booked before the groups' stages.
  CHECK(r.split_probe_s > 0);
  CHECK(r.total_s ==
        Approx(r.split_probe_s + std::max(r.stages[0].time_s, r.stages[1].time_s) + r.fusion_s + r.stages[2].time_s));
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("experiment: a rung too large for the split probe's shards is refused before any run", "[mpi][experiment]") {
  // The probe times both rungs on every rank; the check before training
  // took the largest shard (one rank) for concurrent stages, so a coarse
  // batch that fits one rank's shard but not every rank's failed only when
  // the probe ran, after the earlier methods had trained (session 57).
  Communicator world = Communicator::world();
  const int64_t batch = 48 * world.size() + 16;  // > 96 samples a rank, <= all 96 * ranks
  const auto [dir, cfg] = concurrent_experiment(
      world, "mrmf_mpi_probe_shard", 4, 96, 32, 1,
      "  resolution_overrides: {\"4\": [train.batch_size=" + std::to_string(batch) + ", train.val_batch_size=16]}\n");
  REQUIRE_THROWS_WITH(Orchestrator(cfg, world, Device::cpu(), (dir / "out").string()),
                      Catch::Contains("concurrent/split probe@4"));
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("experiment: a concurrent run whose coarse group diverges ends there, recorded as diverged",
          "[mpi][experiment]") {
  Communicator world = Communicator::world();
  const auto [dir, cfg] = concurrent_experiment(world, "mrmf_mpi_diverge", 6, 64, 16, 1,
                                                "  concurrent_times: [2.0, 1.0]\n"
                                                "  resolution_overrides: {\"4\": [optimizer.lr=1.0e+8]}\n");
  Orchestrator orch(cfg, world, Device::cpu(), (dir / "out").string());
  const MethodRun r = orch.run("concurrent", 1);
  REQUIRE(r.concurrent_groups);
  REQUIRE(r.stages.size() == 2);  // no fine-tuning of a model that has nothing to fuse
  CHECK(r.stages[0].stop_reason == "diverged");
  CHECK(r.stages[1].stop_reason != "diverged");
  CHECK(std::isnan(r.final_val_loss));
  CHECK_FALSE(r.reached_target);
  CHECK(r.fusion_s == 0);
  CHECK(r.total_s == Approx(std::max(r.stages[0].time_s, r.stages[1].time_s)));
  CHECK_FALSE(fs::exists(dir / "out" / "concurrent" / "seed1" / "finetune"));
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("experiment: a concurrent run whose split probe diverges is recorded as diverged and the experiment goes on",
          "[mpi][experiment]") {
  // The probe trains a few steps of each rung to time them; a rung that
  // diverges there would diverge in its stage too. It used to end the whole
  // experiment with an error (the runs after it lost).
  Communicator world = Communicator::world();
  const auto [dir, cfg] = concurrent_experiment(world, "mrmf_mpi_probe_diverge", 6, 64, 16, 1,
                                                "  probe_steps: 3\n"
                                                "  resolution_overrides: {\"4\": [optimizer.lr=1.0e+30]}\n");
  REQUIRE(cfg.concurrent_times.empty());  // probed
  Orchestrator orch(cfg, world, Device::cpu(), (dir / "out").string());
  const MethodRun r = orch.run("concurrent", 1);
  CHECK(r.stages.empty());  // no group trained
  CHECK(std::isnan(r.final_val_loss));
  CHECK_FALSE(r.reached_target);
  CHECK(r.split_probe_s > 0);
  CHECK(r.total_s == Approx(r.split_probe_s));
  // Not recorded as the split: a --resume probes again.
  CHECK_FALSE(fs::exists(dir / "out" / "concurrent" / "seed1" / "split.json"));
  // The report and its chart take a run without stages: diverged, its probe's time.
  if (world.is_root()) {
    ReportContext ctx;
    ctx.target_val_loss = cfg.target_val_loss;
    const std::string md = write_report((dir / "out").string(), {r}, ctx);
    CHECK_THAT(md, Catch::Contains("diverged"));
    CHECK_THAT(md, Catch::Contains("split probe"));
    CHECK(fs::exists(dir / "out" / "chart.svg"));
    const auto summary = nlohmann::json::parse(std::ifstream(dir / "out" / "summary.json"));
    CHECK(summary.dump().find("diverged") != std::string::npos);
  }
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("experiment: with concurrent_overtime the group done first trains on until the other is done",
          "[mpi][experiment]") {
  Communicator world = Communicator::world();
  // The coarse group (1/4 resolution) stops after one epoch, the dense one
  // after three full-resolution epochs: the coarse group is done first.
  const auto [dir, cfg] = concurrent_experiment(world, "mrmf_mpi_overtime", 5, 96, 32, 3,
                                                "  concurrent_times: [2.0, 1.0]\n  concurrent_overtime: true\n");
  REQUIRE(cfg.concurrent_overtime);
  Orchestrator orch(cfg, world, Device::cpu(), (dir / "out").string());
  const MethodRun r = orch.run("concurrent", 1);
  REQUIRE(r.stages.size() == 3);
  const StageResult &coarse = r.stages[0], &dense = r.stages[1];
  INFO("coarse: " << coarse.epochs << " epochs, " << coarse.stop_reason << "; dense: " << dense.epochs << " epochs, "
                  << dense.stop_reason);
  CHECK(coarse.epochs > 1);  // past its 1-epoch guard
  CHECK_THAT(coarse.stop_reason, Catch::StartsWith("max_epochs +") && Catch::EndsWith(" while waiting"));
  CHECK(coarse.stop_reason == "max_epochs +" + std::to_string(coarse.epochs - 1) + " while waiting");
  CHECK(dense.epochs == 3);  // the group done last does not train on
  CHECK(dense.stop_reason == "max_epochs");
  // Only the last extra epoch may end early (at the first step after the
  // dense group's signal; whether the signal falls inside an epoch is timing).
  REQUIRE(coarse.history.size() == static_cast<size_t>(coarse.epochs));
  for (size_t k = 0; k + 1 < coarse.history.size(); ++k) CHECK_FALSE(coarse.history[k].cut_short);
  for (const EpochRecord& e : dense.history) CHECK_FALSE(e.cut_short);
  CHECK(r.epochs_before_fusion == coarse.epochs + dense.epochs);
  // The stage records agree on every rank (rank 0 writes the report).
  const std::string mine = std::to_string(coarse.epochs) + "/" + std::to_string(dense.epochs);
  CHECK(world.broadcast_string(mine, 0) == mine);
  CHECK(std::isfinite(r.final_val_loss));
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("BN re-calibration: every rank ends with the rank-averaged statistics", "[mpi][fusion][bn]") {
  Communicator world = Communicator::world();
  const auto [dir, rc] = tiny_bn_run(world, "mrmf_mpi_bn", 9);
  TrainerOptions o;
  o.progress = false;
  Trainer t(rc, world, Device::cpu(), o);
  // Each rank's own re-calibration on its shard (a one-rank communicator)...
  Communicator self = world.split(world.rank(), 0);
  auto local = clone_model(t.model(), t.spec(), Device::cpu());
  REQUIRE(recalibrate_batchnorm(*local, t.context(), t.train_loader(), self, 2).batches == 2);
  // ...differs between ranks (different samples), and the collective one is their average.
  REQUIRE(recalibrate_batchnorm(t.model(), t.context(), t.train_loader(), world, 2).batches == 2);
  const Tensor mine = t.model().params().buffers().clone();
  Tensor root = mine.clone(), avg = local->params().buffers().clone();
  world.broadcast(root, 0, cpu_stream());
  world.allreduce_avg(avg, cpu_stream());
  REQUIRE(std::memcmp(root.raw_data(), mine.raw_data(), mine.nbytes()) == 0);
  for (int64_t i = 0; i < mine.numel(); ++i)
    REQUIRE(std::fabs(mine.data<float>()[i] - avg.data<float>()[i]) <= 1e-6 * std::max(1.f, std::fabs(avg.data<float>()[i])));
  Tensor lroot = local->params().buffers().clone();
  world.broadcast(lroot, 0, cpu_stream());
  const bool same_local = std::memcmp(lroot.raw_data(), local->params().buffers().raw_data(), lroot.nbytes()) == 0;
  REQUIRE(world.allreduce_sum(same_local ? 0.0 : 1.0) == static_cast<double>(world.size() - 1));
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("trainer: every rank validates, and rank 0 saves, the rank-averaged BN statistics", "[mpi][trainer][bn]") {
  Communicator world = Communicator::world();
  const auto [dir, rc] = tiny_bn_run(world, "mrmf_mpi_bnval", 11, "stop: {max_epochs: 1}\n");
  TrainerOptions o;
  o.progress = false;
  Trainer t(rc, world, Device::cpu(), o);
  const FitResult r = t.fit();
  REQUIRE(r.epochs() == 1);
  // Identical BN running statistics on every rank after the epoch (each
  // rank's had followed its own batches), so the validation loss every rank
  // agreed on is that of the model rank 0 would save.
  const Tensor mine = t.model().params().buffers().clone();
  REQUIRE(mine.numel() > 0);
  Tensor root = mine.clone();
  world.broadcast(root, 0, cpu_stream());
  const bool same = std::memcmp(root.raw_data(), mine.raw_data(), mine.nbytes()) == 0;
  CHECK(world.allreduce_sum(same ? 0.0 : 1.0) == 0.0);
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("trainer: an epoch's columns are one rank's, and waiting for a slower rank is comm, not compute",
          "[mpi][trainer]") {
  Communicator world = Communicator::world();
  const auto [dir, rc] = tiny_bn_run(world, "mrmf_mpi_columns", 13, "stop: {max_epochs: 1}\n");
  TrainerOptions o;
  o.progress = false;
  // The last rank is slow between steps (4 steps of 16 of its 64 samples):
  // the others wait for it in the next step's loss all-reduce. Those waits
  // (3 x 0.15 s) used to land in their compute time, and the max of each
  // column over ranks then mixed one rank's compute with another's epoch.
  const double kSleep = 0.15;
  if (world.rank() == world.size() - 1)
    o.on_step = [kSleep](int64_t) { std::this_thread::sleep_for(std::chrono::duration<double>(kSleep)); };
  Trainer t(rc, world, Device::cpu(), o);
  const FitResult res = t.fit();
  REQUIRE(res.history.size() == 1);
  const EpochRecord& e = res.history[0];
  REQUIRE(e.steps == 4);
  // The same record on every rank.
  const std::vector<double> all = world.allgather({e.io_s, e.compute_s, e.comm_s, e.val_s, e.epoch_s});
  for (int r = 1; r < world.size(); ++r)
    for (int k = 0; k < 5; ++k) CHECK(all[5 * r + k] == all[k]);
  // The tiny steps compute in milliseconds; the 0.45 s of waiting is either
  // comm (a waiting rank's record) or outside every column (the sleeper's
  // own: its sleeps are between the steps), never compute.
  CHECK(e.compute_s < 2 * kSleep);
  const double outside = e.epoch_s - (e.io_s + e.compute_s + e.comm_s + e.val_s);
  CHECK(outside >= -1e-6);  // the columns are parts of the epoch
  CHECK((e.comm_s >= 2 * kSleep || outside >= 2 * kSleep));
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}

TEST_CASE("trainer: rank 0's work between epochs (checkpoint, metrics) is outside the next epoch", "[mpi][trainer]") {
  Communicator world = Communicator::world();
  const auto [dir, rc] = tiny_bn_run(world, "mrmf_mpi_between", 17, "stop: {max_epochs: 2}\n");
  TrainerOptions o;
  o.progress = false;
  // Rank 0 is slow after epoch 0 (as a large checkpoint write is): the other
  // ranks must not start epoch 1's clock and wait for it inside a step.
  const double kSlow = 0.5;
  if (world.is_root())
    o.on_epoch = [kSlow](const EpochRecord& e) {
      if (e.epoch == 0) std::this_thread::sleep_for(std::chrono::duration<double>(kSlow));
    };
  Trainer t(rc, world, Device::cpu(), o);
  const FitResult res = t.fit();
  REQUIRE(res.history.size() == 2);
  const EpochRecord& e1 = res.history[1];
  INFO("epoch 1: io " << e1.io_s << " compute " << e1.compute_s << " comm " << e1.comm_s << " epoch " << e1.epoch_s);
  CHECK(e1.comm_s < kSlow / 2);
  CHECK(e1.epoch_s - (e1.io_s + e1.compute_s + e1.comm_s + e1.val_s) < kSlow / 2);
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
}
