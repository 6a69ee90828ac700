// Synthetic Neuron Inverter data: voltage traces of a multi-compartment
// Hodgkin-Huxley-type neuron whose 19 conductances are the regression targets,
// written in Jan Balewski's layout (see data/formats.h).
//
// Model (why it looks like this: the real benchmark fits 19 conductances of a
// detailed cortical cell from soma/axon/dendrite probes; we keep that structure
// at a cost of ~1-2 ms per sample):
//   4 compartments in a chain  axon - soma - proximal dendrite - distal dendrite,
//   relative areas 0.2 / 1 / 1.5 / 2, C = 1 uF/cm^2;
//   channels: transient Na (m^3 h, Traub-Miles), delayed rectifier K (n^4),
//   slow M-type K (p), A-type K (a^4 b), H current (q), leak;
//   19 parameters = 17 channel densities + soma-axon and soma-dendrite axial
//   conductances, each g = g_nominal * 10^u with u uniform in [-1, 1] (the stored
//   "unitStar" label is u itself: the log10 position within +/- 1 decade).
// Integration: Rush-Larsen (exponential Euler) for the gates with tabulated
// rates (0.1 mV grid, linear interpolation), backward Euler for the voltages
// (a tridiagonal solve along the chain), so any dt is stable. The current
// stimulus (step, ramp, hyperpolarising step, noisy chirp) is injected at the
// soma; it is derived from the seed and shared by all samples.
// Recording: soma, axon and distal-dendrite voltage at every step, averaged in
// groups of `steps_per_bin` into T bins (the original: 8000 steps at 40 kHz ->
// 1600 bins), then z-scored per channel with statistics of the training split
// (computed on its first `zscore_samples` samples; stored in meta.JSON).
// Each sample depends only on (seed, split, index): identical for any thread count.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/formats.h"

namespace mrmf::data {

struct NeuronGenOptions {
  int64_t train = 16384, val = 2048, test = 2048;
  uint64_t seed = 1;
  int time_bins = 1600;      // T
  int steps_per_bin = 5;     // internal steps averaged into one bin (raised so that dt <= 0.2 ms)
  double duration_ms = 200;  // recorded time; dt = duration / (T * steps_per_bin)
  DType dtype = DType::F32;  // stored frames: F32 or F16
  int threads = 0;           // OpenMP threads; 0 = runtime default
  int64_t zscore_samples = 4096;
  std::function<void(int64_t done, int64_t total)> progress;  // called on the calling thread
};

struct NeuronGenSummary {
  int64_t samples = 0, bytes = 0;
  double seconds = 0;
  std::array<double, 3> mean{}, stddev{};  // z-score statistics (mV)
};

constexpr int kNeuronChannels = 3;  // soma, axon, dendrite probes
const std::array<const char*, 19>& neuron_param_names();
const std::array<double, 19>& neuron_param_nominal();  // mS/cm^2

class NeuronSimulator {
 public:
  explicit NeuronSimulator(const NeuronGenOptions& opts);
  int time_bins() const { return bins_; }
  double dt_ms() const { return dt_; }
  int steps_per_bin() const { return spb_; }
  const std::vector<float>& stimulus() const { return stim_; }  // uA/cm^2 per internal step
  // Unit labels of a sample (u in [-1, 1]^19).
  void labels(Split s, int64_t index, float* unit) const;
  // Raw (not z-scored) traces [T, 3] in mV, row-major time-major like the file.
  void simulate(Split s, int64_t index, float* traces, float* unit) const;
  // `count` samples in parallel: traces [count, T, 3], labels [count, 19].
  void simulate_block(Split s, int64_t begin, int64_t count, float* traces, float* unit, int threads) const;

 private:
  void build_tables();
  void build_stimulus(uint64_t seed);
  uint64_t seed_;
  int bins_, spb_, settle_steps_;
  double dt_;
  std::vector<float> stim_;
  // Per V grid point: for each of 7 gate types, (x_inf, 1 - exp(-dt/tau)).
  std::vector<double> table_;
};

// Writes the Balewski-layout file atomically. An existing file is an error unless `overwrite`.
NeuronGenSummary generate_neuron_inverter(const std::string& path, const NeuronGenOptions& opts,
                                          bool overwrite = false);

}  // namespace mrmf::data
