#include "data/gen_neuron.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/output_paths.h"
#include "kernels/philox.h"

namespace fs = std::filesystem;

namespace mrmf::data {
namespace {

using kernels::philox_uniform;

// Gate types; each compartment uses a subset.
enum Gate { kM = 0, kH, kN, kP, kA, kB, kQ, kGates };
// Channel densities of one compartment (mS/cm^2).
enum Chan { cNa = 0, cKdr, cKm, cKA, cIh, cL, kChans };

constexpr int kComps = 4;  // 0 axon, 1 soma, 2 proximal dendrite, 3 distal dendrite
constexpr double kArea[kComps] = {0.2, 1.0, 1.5, 2.0};
constexpr double kENa = 50, kEK = -90, kEh = -35, kEL = -70, kCm = 1.0, kVT = -58;
constexpr double kGDendDend = 0.5;  // proximal-distal axial conductance, fixed
constexpr double kVmin = -130, kVmax = 70, kDV = 0.1;
constexpr int kNV = static_cast<int>((kVmax - kVmin) / kDV) + 1;

// Parameter k -> (compartment, channel); 17 and 18 are axial conductances.
struct ParamSlot {
  int comp, chan;
};
constexpr ParamSlot kSlots[17] = {{1, cNa}, {1, cKdr}, {1, cKm}, {1, cKA}, {1, cIh}, {1, cL},
                                  {0, cNa}, {0, cKdr}, {0, cKm}, {0, cL},
                                  {2, cNa}, {2, cKdr}, {2, cIh}, {2, cL},
                                  {3, cKA}, {3, cIh}, {3, cL}};

const std::array<const char*, 19> kNames = {
    "soma_gNa", "soma_gKdr", "soma_gKm",  "soma_gKA",  "soma_gIh",  "soma_gL",   "axon_gNa",
    "axon_gKdr", "axon_gKm", "axon_gL",   "dend_gNa",  "dend_gKdr", "dend_gIh",  "dend_gL",
    "apic_gKA", "apic_gIh",  "apic_gL",   "g_soma_axon", "g_soma_dend"};
const std::array<double, 19> kNominal = {50, 6, 0.1, 2, 0.05, 0.05, 150, 15, 0.1, 0.05,
                                         5,  2, 0.2, 0.05, 2, 0.5, 0.05, 0.5, 0.5};

// x / (exp(x) - 1), continuous at 0 (the removable singularity of the HH rates).
double efun(double x) { return std::abs(x) < 1e-6 ? 1.0 - x / 2 : x / std::expm1(x); }

// Steady state and time constant (ms) of each gate at V (mV).
void gate_rates(double v, double inf[kGates], double tau[kGates]) {
  auto ab = [&](int g, double a, double b) {
    inf[g] = a / (a + b);
    tau[g] = 1.0 / (a + b);
  };
  ab(kM, 1.28 * efun(-(v - kVT - 13) / 4), 1.4 * efun((v - kVT - 40) / 5));
  ab(kH, 0.128 * std::exp(-(v - kVT - 17) / 18), 4.0 / (1 + std::exp(-(v - kVT - 40) / 5)));
  ab(kN, 0.16 * efun(-(v - kVT - 15) / 5), 0.5 * std::exp(-(v - kVT - 10) / 40));
  inf[kP] = 1 / (1 + std::exp(-(v + 35) / 10));
  tau[kP] = 400 / (3.3 * std::exp((v + 35) / 20) + std::exp(-(v + 35) / 20));
  inf[kA] = 1 / (1 + std::exp(-(v + 60) / 8.5));
  tau[kA] = 0.37 + 1 / (std::exp((v + 35.8) / 19.7) + std::exp(-(v + 79.7) / 12.7));
  inf[kB] = 1 / (1 + std::exp((v + 78) / 6));
  tau[kB] = 20;
  inf[kQ] = 1 / (1 + std::exp((v + 82) / 7));
  tau[kQ] = 0.2 / (std::exp(-14.59 - 0.086 * v) + std::exp(-1.87 + 0.0701 * v));
}

enum Purpose : uint64_t { kLabels = 0 };
uint64_t stream_id(uint64_t split, int64_t index, uint64_t p) {
  return (split << 56) | (static_cast<uint64_t>(index) << 4) | p;
}
constexpr uint64_t kStimulusSplit = 3;  // a stream no sample uses

}  // namespace

const std::array<const char*, 19>& neuron_param_names() { return kNames; }
const std::array<double, 19>& neuron_param_nominal() { return kNominal; }

NeuronSimulator::NeuronSimulator(const NeuronGenOptions& o)
    : seed_(o.seed), bins_(o.time_bins), spb_(o.steps_per_bin) {
  MRMF_CHECK_KIND(Usage, o.time_bins >= 8 && o.time_bins <= 1000000, "--time-bins must be within 8..1000000, got ",
                  o.time_bins);
  MRMF_CHECK_KIND(Usage, o.steps_per_bin >= 1 && o.duration_ms > 0, "steps per bin and duration must be positive");
  // Few bins: more steps per bin, so that dt stays <= 0.2 ms (spikes stay resolved).
  spb_ = std::max<int>(spb_, static_cast<int>(std::ceil(o.duration_ms / (bins_ * 0.2) - 1e-9)));
  dt_ = o.duration_ms / (static_cast<double>(bins_) * spb_);
  settle_steps_ = static_cast<int>(std::lround(20.0 / dt_));  // 20 ms at rest before recording
  build_tables();
  build_stimulus(o.seed);
}

void NeuronSimulator::build_tables() {
  table_.resize(static_cast<size_t>(kNV) * 2 * kGates);
  double inf[kGates], tau[kGates];
  for (int i = 0; i < kNV; ++i) {
    gate_rates(kVmin + i * kDV, inf, tau);
    for (int g = 0; g < kGates; ++g) {
      table_[(static_cast<size_t>(i) * kGates + g) * 2] = inf[g];
      table_[(static_cast<size_t>(i) * kGates + g) * 2 + 1] = -std::expm1(-dt_ / tau[g]);
    }
  }
}

// Segments as fractions of the recording: rest, step, rest, ramp,
// hyperpolarising step, noisy chirp (5 -> 100 Hz), rest. Amplitudes (uA/cm^2)
// and the noise come from the seed, so one data set has one stimulus.
void NeuronSimulator::build_stimulus(uint64_t seed) {
  const uint64_t st = stream_id(kStimulusSplit, 0, 0);
  auto u = [&](uint64_t i) { return static_cast<double>(philox_uniform(seed, st, i)); };
  const double a_step = 2 + 2 * u(0), a_ramp = 4 + 4 * u(1), a_hyp = 1 + u(2), a_chirp = 3 + 3 * u(3),
               a_noise = 1 + u(4);
  const int64_t steps = static_cast<int64_t>(bins_) * spb_;
  const double dur = steps * dt_, tau_noise = 2.0, decay = std::exp(-dt_ / tau_noise),
               kick = std::sqrt(1 - decay * decay);
  stim_.resize(static_cast<size_t>(steps));
  double noise = 0;
  for (int64_t k = 0; k < steps; ++k) {
    const double f = (k + 0.5) / steps, t = f * dur;
    // Ornstein-Uhlenbeck noise (2 ms correlation), Box-Muller from two uniforms.
    const double g = std::sqrt(-2 * std::log(1 - u(8 + 2 * k))) * std::cos(6.283185307179586 * u(9 + 2 * k));
    noise = noise * decay + kick * g;
    double i = 0;
    if (f >= 0.05 && f < 0.25) i = a_step;
    else if (f >= 0.30 && f < 0.50) i = a_ramp * (f - 0.30) / 0.20;
    else if (f >= 0.50 && f < 0.55) i = -a_hyp;
    else if (f >= 0.55 && f < 0.95) {
      const double tc = t - 0.55 * dur, len = 0.40 * dur, f0 = 0.005, f1 = 0.1;  // kHz (t in ms)
      const double phase = 6.283185307179586 * (f0 * tc + (f1 - f0) * tc * tc / (2 * len));
      i = a_chirp * (0.5 - 0.5 * std::cos(phase)) + a_noise * noise;
    }
    stim_[static_cast<size_t>(k)] = static_cast<float>(i);
  }
}

void NeuronSimulator::labels(Split s, int64_t index, float* unit) const {
  const uint64_t st = stream_id(static_cast<uint64_t>(s), index, kLabels);
  for (int k = 0; k < 19; ++k) unit[k] = 2.0f * philox_uniform(seed_, st, static_cast<uint64_t>(k)) - 1.0f;
}

void NeuronSimulator::simulate(Split s, int64_t index, float* traces, float* unit) const {
  labels(s, index, unit);
  double gbar[kComps][kChans] = {};
  for (int k = 0; k < 17; ++k) gbar[kSlots[k].comp][kSlots[k].chan] = kNominal[k] * std::pow(10.0, unit[k]);
  const double g_axial[kComps - 1] = {kNominal[17] * std::pow(10.0, unit[17]), kNominal[18] * std::pow(10.0, unit[18]),
                                      kGDendDend};
  // Per-area coupling seen by each compartment (left/right neighbour in the chain).
  double cl[kComps] = {}, cr[kComps] = {};
  for (int i = 0; i < kComps - 1; ++i) {
    cr[i] = g_axial[i] / kArea[i];
    cl[i + 1] = g_axial[i] / kArea[i + 1];
  }
  // Which gates each compartment integrates (skip absent channels).
  bool uses[kComps][kGates] = {};
  for (int c = 0; c < kComps; ++c) {
    uses[c][kM] = uses[c][kH] = gbar[c][cNa] > 0;
    uses[c][kN] = gbar[c][cKdr] > 0;
    uses[c][kP] = gbar[c][cKm] > 0;
    uses[c][kA] = uses[c][kB] = gbar[c][cKA] > 0;
    uses[c][kQ] = gbar[c][cIh] > 0;
  }
  double v[kComps], x[kComps][kGates];
  {
    double inf[kGates], tau[kGates];
    gate_rates(kEL, inf, tau);
    for (int c = 0; c < kComps; ++c) {
      v[c] = kEL;
      for (int g = 0; g < kGates; ++g) x[c][g] = inf[g];
    }
  }
  const double cdt = kCm / dt_;
  const double* tab = table_.data();
  const int64_t steps = static_cast<int64_t>(bins_) * spb_;
  double acc[kNeuronChannels] = {};
  for (int64_t k = -settle_steps_; k < steps; ++k) {
    double diag[kComps], rhs[kComps];
    for (int c = 0; c < kComps; ++c) {
      // Rush-Larsen gate update with rates interpolated at the current voltage.
      const double pos = std::clamp((v[c] - kVmin) / kDV, 0.0, kNV - 1.000001);
      const int j = static_cast<int>(pos);
      const double w = pos - j;
      const double* r0 = tab + static_cast<size_t>(j) * 2 * kGates;
      const double* r1 = r0 + 2 * kGates;
      for (int g = 0; g < kGates; ++g) {
        if (!uses[c][g]) continue;
        const double inf = r0[2 * g] + w * (r1[2 * g] - r0[2 * g]);
        const double e = r0[2 * g + 1] + w * (r1[2 * g + 1] - r0[2 * g + 1]);
        x[c][g] += e * (inf - x[c][g]);
      }
      const double* gx = x[c];
      const double m3h = gx[kM] * gx[kM] * gx[kM] * gx[kH], n2 = gx[kN] * gx[kN], a2 = gx[kA] * gx[kA];
      const double g_na = gbar[c][cNa] * m3h;
      const double g_k = gbar[c][cKdr] * n2 * n2 + gbar[c][cKm] * gx[kP] + gbar[c][cKA] * a2 * a2 * gx[kB];
      const double g_h = gbar[c][cIh] * gx[kQ], g_l = gbar[c][cL];
      diag[c] = cdt + g_na + g_k + g_h + g_l + cl[c] + cr[c];
      rhs[c] = cdt * v[c] + g_na * kENa + g_k * kEK + g_h * kEh + g_l * kEL;
    }
    if (k >= 0) rhs[1] += stim_[static_cast<size_t>(k)] / kArea[1];  // injected at the soma
    // Backward Euler: tridiagonal system along the chain (Thomas algorithm).
    double cp[kComps], dp[kComps];
    cp[0] = -cr[0] / diag[0];
    dp[0] = rhs[0] / diag[0];
    for (int c = 1; c < kComps; ++c) {
      const double m = diag[c] + cl[c] * cp[c - 1];
      cp[c] = -cr[c] / m;
      dp[c] = (rhs[c] + cl[c] * dp[c - 1]) / m;
    }
    v[kComps - 1] = dp[kComps - 1];
    for (int c = kComps - 2; c >= 0; --c) v[c] = dp[c] - cp[c] * v[c + 1];
    if (k < 0) continue;
    acc[0] += v[1];  // probes: soma, axon, distal dendrite
    acc[1] += v[0];
    acc[2] += v[3];
    if ((k + 1) % spb_ == 0) {
      float* out = traces + (k / spb_) * kNeuronChannels;
      for (int ch = 0; ch < kNeuronChannels; ++ch) {
        out[ch] = static_cast<float>(acc[ch] / spb_);
        acc[ch] = 0;
      }
    }
  }
}

void NeuronSimulator::simulate_block(Split s, int64_t begin, int64_t count, float* traces, float* unit,
                                     int threads) const {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  const int64_t per = static_cast<int64_t>(bins_) * kNeuronChannels;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
  for (int64_t i = 0; i < count; ++i) simulate(s, begin + i, traces + i * per, unit + i * 19);
}

NeuronGenSummary generate_neuron_inverter(const std::string& path, const NeuronGenOptions& o, bool overwrite) {
  const auto t0 = std::chrono::steady_clock::now();
  MRMF_CHECK_KIND(Usage, o.train >= 0 && o.val >= 0 && o.test >= 0 && o.train + o.val + o.test > 0,
                  "sample counts must be non-negative and not all zero");
  MRMF_CHECK_KIND(Usage, o.dtype == DType::F32 || o.dtype == DType::F16, "--dtype must be float32 or float16");
  refuse_existing_output(path, overwrite);
  const NeuronSimulator sim(o);
  const int64_t T = o.time_bins, per = T * kNeuronChannels, counts[3] = {o.train, o.val, o.test};
  const int64_t total = o.train + o.val + o.test;
  NeuronGenSummary sum;

  // z-score statistics from the first samples of the training split (of the
  // first non-empty split when there is no training split).
  Split stat_split = Split::Train;
  for (Split s : kAllSplits)
    if (counts[static_cast<size_t>(s)] > 0) {
      stat_split = s;
      break;
    }
  const int64_t n_stat = std::min<int64_t>(std::max<int64_t>(o.zscore_samples, 1), counts[static_cast<size_t>(stat_split)]);
  std::vector<float> pilot(static_cast<size_t>(n_stat * per)), pilot_lab(static_cast<size_t>(n_stat * 19));
  sim.simulate_block(stat_split, 0, n_stat, pilot.data(), pilot_lab.data(), o.threads);
  {
    // Per-sample partial sums first, reduced in index order: deterministic.
    double s1[3] = {}, s2[3] = {};
    for (int64_t i = 0; i < n_stat; ++i)
      for (int64_t t = 0; t < T; ++t)
        for (int ch = 0; ch < 3; ++ch) {
          const double val = pilot[static_cast<size_t>(i * per + t * 3 + ch)];
          s1[ch] += val;
          s2[ch] += val * val;
        }
    const double n = static_cast<double>(n_stat * T);
    for (int ch = 0; ch < 3; ++ch) {
      sum.mean[static_cast<size_t>(ch)] = s1[ch] / n;
      sum.stddev[static_cast<size_t>(ch)] = std::sqrt(std::max(s2[ch] / n - (s1[ch] / n) * (s1[ch] / n), 1e-12));
    }
  }
  auto zscore = [&](float* f, int64_t count) {
    for (int64_t i = 0; i < count * T; ++i)
      for (int ch = 0; ch < 3; ++ch)
        f[i * 3 + ch] = static_cast<float>((f[i * 3 + ch] - sum.mean[static_cast<size_t>(ch)]) /
                                           sum.stddev[static_cast<size_t>(ch)]);
  };

  AtomicOutput out(path);
  {
    NeuronInverterWriter w(out.temp_path(), o.dtype);
    for (Split s : kAllSplits)
      if (counts[static_cast<size_t>(s)] > 0) w.create_split(s, counts[static_cast<size_t>(s)], T, kNeuronChannels);
    const int64_t chunk = 1024;
    int64_t done = 0;
    for (Split s : kAllSplits) {
      const int64_t ns = counts[static_cast<size_t>(s)];
      for (int64_t b = 0; b < ns; b += chunk) {
        const int64_t nb = std::min(chunk, ns - b);
        Tensor frames = Tensor::empty({nb, T, kNeuronChannels}, DType::F32);
        Tensor labels = Tensor::empty({nb, 19}, DType::F32);
        float* fp = frames.data<float>();
        float* lp = labels.data<float>();
        // Samples already simulated for the statistics are reused, not re-run.
        const int64_t reuse = (s == stat_split) ? std::clamp<int64_t>(n_stat - b, 0, nb) : 0;
        if (reuse > 0) {
          std::copy_n(pilot.data() + b * per, reuse * per, fp);
          std::copy_n(pilot_lab.data() + b * 19, reuse * 19, lp);
        }
        sim.simulate_block(s, b + reuse, nb - reuse, fp + reuse * per, lp + reuse * 19, o.threads);
        zscore(fp, nb);
        w.write(s, b, frames, labels);
        done += nb;
        if (o.progress) o.progress(done, total);
      }
    }
    nlohmann::json meta;
    meta["generator"] = "mrmf datagen neuron-inverter";
    meta["seed"] = o.seed;
    meta["time_bins"] = T;
    meta["steps_per_bin"] = sim.steps_per_bin();
    meta["dt_ms"] = sim.dt_ms();
    meta["duration_ms"] = o.duration_ms;
    meta["probes"] = {"soma", "axon", "dendrite"};
    meta["compartments"] = {"axon", "soma", "proximal dendrite", "distal dendrite"};
    meta["par_names"] = std::vector<std::string>(kNames.begin(), kNames.end());
    meta["par_nominal_mS_cm2"] = std::vector<double>(kNominal.begin(), kNominal.end());
    meta["unitStar"] = "u in [-1, 1]; g = nominal * 10^u";
    meta["zscore"] = {{"mean_mV", sum.mean}, {"std_mV", sum.stddev}, {"split", split_name(stat_split)},
                      {"samples", n_stat}};
    meta["num_samples"] = {{"train", o.train}, {"val", o.val}, {"test", o.test}};
    meta["frames_dtype"] = dtype_name(o.dtype);
    w.write_meta(meta.dump());
    w.close();
  }
  out.commit();
  sum.samples = total;
  sum.bytes = static_cast<int64_t>(fs::file_size(path));
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace mrmf::data
