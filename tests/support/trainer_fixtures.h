// Fixtures shared by the trainer tests (test_trainer.cpp,
// test_trainer_checkpoint.cpp): a small generated Neuron Inverter file, a
// small model's run config, a run into a folder, and what a run leaves there.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "data/gen_neuron.h"
#include "fusion/checkpoint.h"
#include "fusion/config.h"
#include "fusion/trainer.h"

namespace mrmf::test::trainer {

namespace fs = std::filesystem;

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
inline Scratch& scratch() {
  static Scratch s;
  return s;
}

// A singleton MPI world: the trainer talks to a Communicator even on one rank.
inline Communicator& world() {
  static bool inited = [] {
    mpi_init(nullptr, nullptr);
    std::atexit([] { mpi_finalize(); });
    return true;
  }();
  (void)inited;
  static Communicator w = Communicator::world();
  return w;
}

inline const std::string& ni_file() {
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
inline std::string base_yaml() {
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

inline RunConfig config(std::vector<std::string> sets = {}) { return parse_run_config(base_yaml(), sets); }

inline FitResult run(const RunConfig& cfg, const std::string& out, bool resume = false,
                     std::function<void(const EpochRecord&)> on_epoch = nullptr) {
  TrainerOptions o;
  o.out_dir = out;
  o.resume = resume;
  o.progress = false;
  o.on_epoch = std::move(on_epoch);
  Trainer t(cfg, world(), Device::cpu(), o);
  return t.fit();
}

inline std::string out_dir(const std::string& name) { return (scratch().dir / name).string(); }
inline std::string ckpt(const std::string& dir) { return (fs::path(dir) / "checkpoint.h5").string(); }

// Parameters and buffers (BN running statistics) of a checkpoint, as raw bytes.
inline std::string weights_of(const std::string& path) {
  LoadedModel m = load_model_from_checkpoint(path, Device::cpu());
  const Tensor v = m.model->params().values(), b = m.model->params().buffers();
  std::string s(static_cast<const char*>(v.raw_data()), v.nbytes());
  if (b.numel() > 0) s.append(static_cast<const char*>(b.raw_data()), b.nbytes());
  return s;
}

inline std::vector<nlohmann::json> metrics_of(const std::string& dir) {
  std::vector<nlohmann::json> v;
  std::ifstream in(fs::path(dir) / "metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

struct Thrown {};  // simulates a kill from inside the epoch loop

}  // namespace mrmf::test::trainer
