// Synthetic data generators: determinism (same seed -> same bytes for 1 and 2
// threads), shapes and label ranges, file output through the format readers,
// and learnability: a closed-form ridge regression on simple summary features
// must beat predicting the mean, at full and at half resolution.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "data/cache_budget.h"
#include "data/formats.h"
#include "data/gen_cosmoflow.h"
#include "data/gen_neuron.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("mrmf_gen") {}
};

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Ridge regression fitted on the first `ntr` rows (features standardised on
// them, intercept unpenalised) by the normal equations; returns, per target,
// held-out MSE divided by the held-out variance (1.0 = predicting the mean).
std::vector<double> ridge_mse_ratio(const std::vector<double>& x, const std::vector<double>& y, int n, int f, int p,
                                    int ntr, double lambda) {
  std::vector<double> mu(f, 0), sd(f, 0);
  for (int i = 0; i < ntr; ++i)
    for (int j = 0; j < f; ++j) mu[j] += x[i * f + j] / ntr;
  for (int i = 0; i < ntr; ++i)
    for (int j = 0; j < f; ++j) sd[j] += (x[i * f + j] - mu[j]) * (x[i * f + j] - mu[j]) / ntr;
  const int F = f + 1;
  std::vector<double> z(static_cast<size_t>(n) * F);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < f; ++j) z[i * F + j] = (x[i * f + j] - mu[j]) / (std::sqrt(sd[j]) + 1e-12);
    z[i * F + f] = 1;
  }
  std::vector<double> a(F * F, 0), b(F * p, 0), w(F * p, 0);
  for (int i = 0; i < ntr; ++i)
    for (int r = 0; r < F; ++r) {
      for (int c = 0; c < F; ++c) a[r * F + c] += z[i * F + r] * z[i * F + c];
      for (int k = 0; k < p; ++k) b[r * p + k] += z[i * F + r] * y[i * p + k];
    }
  for (int r = 0; r < f; ++r) a[r * F + r] += lambda;
  for (int c = 0; c < F; ++c)  // Gaussian elimination; the matrix is SPD
    for (int r = c + 1; r < F; ++r) {
      const double m = a[r * F + c] / a[c * F + c];
      for (int k = c; k < F; ++k) a[r * F + k] -= m * a[c * F + k];
      for (int k = 0; k < p; ++k) b[r * p + k] -= m * b[c * p + k];
    }
  for (int c = F - 1; c >= 0; --c)
    for (int k = 0; k < p; ++k) {
      double s = b[c * p + k];
      for (int j = c + 1; j < F; ++j) s -= a[c * F + j] * w[j * p + k];
      w[c * p + k] = s / a[c * F + c];
    }
  std::vector<double> ratio(p);
  for (int k = 0; k < p; ++k) {
    double mean = 0, mse = 0, var = 0;
    for (int i = ntr; i < n; ++i) mean += y[i * p + k] / (n - ntr);
    for (int i = ntr; i < n; ++i) {
      double pred = 0;
      for (int j = 0; j < F; ++j) pred += z[i * F + j] * w[j * p + k];
      mse += (pred - y[i * p + k]) * (pred - y[i * p + k]);
      var += (y[i * p + k] - mean) * (y[i * p + k] - mean);
    }
    ratio[k] = mse / var;
  }
  return ratio;
}

void report(const char* what, const std::vector<double>& r, int& good, double& mean) {
  good = 0;
  mean = 0;
  std::string s;
  for (double v : r) {
    good += v < 0.7;
    mean += v / r.size();
    s += " " + std::to_string(v).substr(0, 4);
  }
  s += " (mean " + std::to_string(mean).substr(0, 5) + ")";
  INFO(what << " held-out MSE / variance:" << s);
  UNSCOPED_INFO(what << ":" << s);
}

// Neuron features: per window of the trace and per channel, mean/std/max/min.
std::vector<double> neuron_features(const std::vector<float>& tr, int n, int t, int windows) {
  const int f = windows * 3 * 4, len = t / windows;
  std::vector<double> x(static_cast<size_t>(n) * f);
  for (int i = 0; i < n; ++i)
    for (int w = 0; w < windows; ++w)
      for (int c = 0; c < 3; ++c) {
        double m = 0, q = 0, hi = -1e30, lo = 1e30;
        for (int k = w * len; k < (w + 1) * len; ++k) {
          const double v = tr[(static_cast<size_t>(i) * t + k) * 3 + c];
          m += v;
          q += v * v;
          hi = std::max(hi, v);
          lo = std::min(lo, v);
        }
        m /= len;
        double* o = &x[static_cast<size_t>(i) * f + (w * 3 + c) * 4];
        o[0] = m;
        o[1] = std::sqrt(std::max(q / len - m * m, 0.0));
        o[2] = hi;
        o[3] = lo;
      }
  return x;
}

// CosmoFlow features per channel: log mean count and the variance of
// log(1 + counts) after 1x, 2x and 4x block averaging (a coarse power spectrum).
std::vector<double> cosmo_features(const std::vector<uint16_t>& cubes, int n, int size, int coarsen) {
  const int s = size / coarsen;
  std::vector<double> x(static_cast<size_t>(n) * 16);
  std::vector<double> cube(static_cast<size_t>(s) * s * s);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < 4; ++c) {
      const uint16_t* src = cubes.data() + static_cast<size_t>(i) * size * size * size * 4;
      std::fill(cube.begin(), cube.end(), 0.0);
      for (int zz = 0; zz < size; ++zz)
        for (int yy = 0; yy < size; ++yy)
          for (int xx = 0; xx < size; ++xx)
            cube[(static_cast<size_t>(zz / coarsen) * s + yy / coarsen) * s + xx / coarsen] +=
                src[((static_cast<size_t>(zz) * size + yy) * size + xx) * 4 + c] / double(coarsen * coarsen * coarsen);
      double* o = &x[static_cast<size_t>(i) * 16 + c * 4];
      double mean = 0;
      for (double v : cube) mean += v / cube.size();
      o[0] = std::log(mean + 1e-3);
      for (int b = 1, k = 1; b <= 4; b *= 2, ++k) {
        const int sb = s / b;
        double m = 0, q = 0;
        for (int z = 0; z < sb; ++z)
          for (int y = 0; y < sb; ++y)
            for (int xx = 0; xx < sb; ++xx) {
              double v = 0;
              for (int dz = 0; dz < b; ++dz)
                for (int dy = 0; dy < b; ++dy)
                  for (int dx = 0; dx < b; ++dx)
                    v += cube[(static_cast<size_t>(z * b + dz) * s + y * b + dy) * s + xx * b + dx];
              v = std::log1p(v / (b * b * b));
              m += v;
              q += v * v;
            }
        const double cnt = double(sb) * sb * sb;
        o[k] = q / cnt - (m / cnt) * (m / cnt);
      }
    }
  return x;
}

}  // namespace

TEST_CASE("generators: neuron-inverter traces are deterministic for any thread count", "[data][generator]") {
  NeuronGenOptions o;
  o.time_bins = 100;
  const NeuronSimulator sim(o);
  const int n = 12, per = 100 * 3;
  std::vector<float> a(n * per), b(n * per), la(n * 19), lb(n * 19);
  sim.simulate_block(Split::Train, 5, n, a.data(), la.data(), 1);
  sim.simulate_block(Split::Train, 5, n, b.data(), lb.data(), 2);
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  REQUIRE(std::memcmp(la.data(), lb.data(), la.size() * 4) == 0);
  for (float u : la) REQUIRE((u >= -1.f && u <= 1.f));
  for (float v : a) REQUIRE((std::isfinite(v) && v > -150.f && v < 100.f));
  // Another split or another seed gives other neurons.
  sim.simulate_block(Split::Val, 5, n, b.data(), lb.data(), 2);
  REQUIRE(std::memcmp(la.data(), lb.data(), la.size() * 4) != 0);
  o.seed = 2;
  NeuronSimulator(o).simulate_block(Split::Train, 5, n, b.data(), lb.data(), 2);
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) != 0);
}

TEST_CASE("generators: neuron-inverter file round trip, z-score, float16, no silent overwrite", "[data][generator]") {
  TempDir tmp;
  NeuronGenOptions o;
  o.train = 40;
  o.val = 8;
  o.test = 6;
  o.time_bins = 64;
  o.threads = 1;
  const auto s1 = generate_neuron_inverter(tmp / "a.h5", o);
  o.threads = 2;
  generate_neuron_inverter(tmp / "b.h5", o);
  REQUIRE(s1.samples == 54);
  const auto fa = NeuronInverterFile::open(tmp / "a.h5"), fb = NeuronInverterFile::open(tmp / "b.h5");
  for (Split s : kAllSplits) {
    const auto& in = fa.info(s);
    REQUIRE((in.t == 64 && in.c == 3 && in.p == 19 && in.dtype == DType::F32));
    const Batch x = fa.read(s, 0, in.n), y = fb.read(s, 0, in.n);
    REQUIRE(same_bytes(x.frames, y.frames));
    REQUIRE(same_bytes(x.labels, y.labels));
    for (int64_t i = 0; i < x.labels.numel(); ++i) REQUIRE(std::abs(x.labels.data<float>()[i]) <= 1.f);
    check_finite(x.frames, "frames");
  }
  // The whole training split was used for the statistics: z-scored exactly.
  const Batch tr = fa.read(Split::Train, 0, 40);
  for (int c = 0; c < 3; ++c) {
    double m = 0, q = 0;
    for (int64_t i = 0; i < 40 * 64; ++i) {
      const double v = tr.frames.data<float>()[i * 3 + c];
      m += v;
      q += v * v;
    }
    m /= 40 * 64;
    REQUIRE(std::abs(m) < 1e-4);
    REQUIRE(std::sqrt(q / (40 * 64) - m * m) == Approx(1.0).epsilon(1e-3));
  }
  const auto meta = nlohmann::json::parse(*fa.meta_json());
  REQUIRE(meta["par_names"].size() == 19);
  REQUIRE(meta["zscore"]["samples"] == 40);
  REQUIRE(meta["time_bins"] == 64);

  // Existing output is kept unless overwriting is asked for.
  try {
    generate_neuron_inverter(tmp / "a.h5", o);
    FAIL("overwrote without permission");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Usage);
    REQUIRE_THAT(e.what(), Contains("a.h5") && Contains("--force"));
  }
  o.dtype = DType::F16;
  generate_neuron_inverter(tmp / "a.h5", o, /*overwrite=*/true);
  const auto fh = NeuronInverterFile::open(tmp / "a.h5");
  REQUIRE(fh.info(Split::Val).dtype == DType::F16);
  const Tensor h = to_float32(fh.read(Split::Val, 0, 8).frames), f = fb.read(Split::Val, 0, 8).frames;
  for (int64_t i = 0; i < h.numel(); ++i)
    REQUIRE(h.data<float>()[i] == half_to_float(float_to_half(f.data<float>()[i])));
  for (const auto& e : fs::directory_iterator(tmp.dir))  // no temporaries left behind
    REQUIRE(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("generators: cosmoflow files are deterministic, shaped and labelled in [-1, 1]", "[data][generator]") {
  TempDir tmp;
  CosmoGenOptions o;
  o.size = 16;
  o.train = 5;
  o.val = 2;
  o.test = 0;
  o.per_file = 3;
  o.threads = 1;
  const auto s = generate_cosmoflow(tmp / "one", o);
  REQUIRE(s.files == 3);  // train: 3 + 2, val: 2
  o.threads = 2;
  // With a memory budget too small for two cubes in the making, one thread
  // makes them, and says so (the data are the same whatever the thread
  // count: compared below).
  {
    std::ostringstream said;
    const auto previous = spdlog::default_logger();
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(said)));
    set_cache_budget(16 * 16 * 16 * 9);
    generate_cosmoflow(tmp / "capped", o);
    set_cache_budget(0);
    spdlog::set_default_logger(previous);
    CHECK_THAT(said.str(), Contains("16^3 cubes take") && Contains("1 thread(s) make them, not 2"));
  }
  generate_cosmoflow(tmp / "two", o);
  const auto a = CosmoFlowFiles::open(tmp / "one/train/*.h5"), b = CosmoFlowFiles::open(tmp / "two/train/*.h5");
  REQUIRE(a.num_files() == 2);
  REQUIRE(a.total() == 5);
  REQUIRE(a.dims() == std::array<int64_t, 3>{16, 16, 16});
  REQUIRE(a.dtype() == DType::U16);
  for (size_t f = 0; f < 2; ++f) {
    const Batch x = a.read(f, 0, a.samples(f)), y = b.read(f, 0, b.samples(f));
    REQUIRE(same_bytes(x.frames, y.frames));
    REQUIRE(same_bytes(x.labels, y.labels));
    const auto capped = CosmoFlowFiles::open(tmp / "capped/train/*.h5");
    REQUIRE(same_bytes(capped.read(f, 0, capped.samples(f)).frames, x.frames));
    for (int64_t i = 0; i < x.labels.numel(); ++i) REQUIRE(std::abs(x.labels.data<float>()[i]) <= 1.f);
    double mean = 0;
    for (int64_t i = 0; i < x.frames.numel(); ++i) mean += x.frames.data<uint16_t>()[i];
    mean /= x.frames.numel();
    REQUIRE((mean > 3 && mean < 20));  // ~ 8 (h / 0.7)^3 counts per voxel
  }
  // Different seeds differ; refusing and forcing an overwrite; stale files removed.
  std::vector<uint16_t> c1(16 * 16 * 16 * 4), c2(c1.size());
  float u1[4], u2[4];
  cosmoflow_sample(16, 1, Split::Train, 0, c1.data(), u1);
  cosmoflow_sample(16, 2, Split::Train, 0, c2.data(), u2);
  REQUIRE(std::memcmp(c1.data(), c2.data(), c1.size() * 2) != 0);
  REQUIRE(std::memcmp(u1, u2, sizeof u1) != 0);
  try {
    generate_cosmoflow(tmp / "one", o);
    FAIL("overwrote without permission");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Usage);
    REQUIRE_THAT(e.what(), Contains("cosmo_000.h5") && Contains("--force"));
  }
  // A forced run that fails part-way (here in its second file) leaves the
  // earlier data set as it was: no file replaced, none removed, no
  // temporary left.
  const auto bytes_of = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string first_before = bytes_of(tmp / "one/train/cosmo_000.h5");
  o.seed = 9;
  o.progress = [](int64_t done, int64_t) {
    if (done > 3) throw std::runtime_error("interrupted");
  };
  REQUIRE_THROWS_WITH(generate_cosmoflow(tmp / "one", o, /*overwrite=*/true), "interrupted");
  o.progress = nullptr;
  CHECK(bytes_of(tmp / "one/train/cosmo_000.h5") == first_before);
  CHECK(CosmoFlowFiles::open(tmp / "one/train/*.h5").total() == 5);
  CHECK(CosmoFlowFiles::open(tmp / "one/val/*.h5").total() == 2);
  for (const auto& e : fs::recursive_directory_iterator(tmp / "one"))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  // Finished, it replaces them and removes the files the new set lacks.
  o.train = 2;
  generate_cosmoflow(tmp / "one", o, /*overwrite=*/true);
  REQUIRE(CosmoFlowFiles::open(tmp / "one/train/*.h5").num_files() == 1);
  CHECK(bytes_of(tmp / "one/train/cosmo_000.h5") != first_before);
  // Another .h5 file in a split folder would be read with the new ones:
  // refused by name, and removed with overwrite.
  fs::create_directories(tmp / "mixed/train");
  fs::copy_file(tmp / "one/train/cosmo_000.h5", tmp / "mixed/train/extra.h5");
  REQUIRE_THROWS_WITH(generate_cosmoflow(tmp / "mixed", o),
                      Contains("extra.h5") && Contains("did not write") && Contains("--force"));
  CHECK(!fs::exists(tmp / "mixed/val"));  // refused before anything was written
  generate_cosmoflow(tmp / "mixed", o, /*overwrite=*/true);
  CHECK(!fs::exists(tmp / "mixed/train/extra.h5"));
  CHECK(CosmoFlowFiles::open(tmp / "mixed/train/*.h5").total() == 2);
  // --out naming a file.
  REQUIRE_THROWS_WITH(generate_cosmoflow(tmp / "one/train/cosmo_000.h5", o, true), Contains("is a file"));
  // Cube sizes: any side in 16..512, odd ones included.
  std::vector<uint16_t> odd(17 * 17 * 17 * 4);
  REQUIRE_NOTHROW(cosmoflow_sample(17, 1, Split::Test, 3, odd.data(), u1));
  for (int bad : {15, 513}) {
    o.size = bad;
    REQUIRE_THROWS_WITH(generate_cosmoflow(tmp / "bad", o), Contains("16..512"));
  }
}

TEST_CASE("generators: neuron-inverter is learnable at full and half time resolution", "[data][generator][learn]") {
  NeuronGenOptions o;
  o.time_bins = 200;
  const NeuronSimulator sim(o);
  const int n = 6000, ntr = 4500, t = 200;
  std::vector<float> tr(static_cast<size_t>(n) * t * 3), lab(n * 19);
  sim.simulate_block(Split::Train, 0, n, tr.data(), lab.data(), 0);
  const std::vector<double> y(lab.begin(), lab.end());
  // Half resolution: average pairs of bins, as the coarse model would see it.
  std::vector<float> half(tr.size() / 2);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < t / 2; ++k)
      for (int c = 0; c < 3; ++c)
        half[(static_cast<size_t>(i) * t / 2 + k) * 3 + c] =
            0.5f * (tr[(static_cast<size_t>(i) * t + 2 * k) * 3 + c] + tr[(static_cast<size_t>(i) * t + 2 * k + 1) * 3 + c]);
  for (int res : {1, 2}) {
    const auto x = res == 1 ? neuron_features(tr, n, t, 20) : neuron_features(half, n, t / 2, 20);
    const auto r = ridge_mse_ratio(x, y, n, 20 * 12, 19, ntr, 30.0);
    int good;
    double mean;
    report(res == 1 ? "neuron T=200" : "neuron T=100", r, good, mean);
    // Every conductance beats the mean (some are weakly identifiable from 200
    // ms of trace), several clearly; half resolution keeps nearly all of it.
    CHECK(good >= 4);
    CHECK(mean < 0.85);
    CHECK(*std::max_element(r.begin(), r.end()) < 1.0);
  }
}

TEST_CASE("generators: cosmoflow is learnable at full and half spatial resolution", "[data][generator][learn]") {
  const int n = 400, ntr = 300, size = 16, vox = size * size * size * 4;
  std::vector<uint16_t> cubes(static_cast<size_t>(n) * vox);
  std::vector<double> y(n * 4);
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < n; ++i) {
    float u[4];
    cosmoflow_sample(size, 7, Split::Train, i, cubes.data() + static_cast<size_t>(i) * vox, u);
    for (int k = 0; k < 4; ++k) y[i * 4 + k] = u[k];
  }
  for (int coarsen : {1, 2}) {
    const auto x = cosmo_features(cubes, n, size, coarsen);
    const auto r = ridge_mse_ratio(x, y, n, 16, 4, ntr, 1.0);
    int good;
    double mean;
    report(coarsen == 1 ? "cosmoflow 16^3" : "cosmoflow 8^3", r, good, mean);
    CHECK(good >= 3);
    CHECK(mean < 0.7);
  }
}

TEST_CASE("datagen: the CLI maps bad flags and existing output to exit code 2", "[data][cli]") {
  // The `mrmf` binary sits in <build>/bin next to <build>/tests/mrmf_unit_tests.
  const fs::path exe = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "bin" / "mrmf";
  if (!fs::exists(exe)) {
    WARN("mrmf binary not found at " << exe << "; CLI test skipped");
    return;
  }
  TempDir tmp;
  auto run = [&](const std::string& args) {
    const int rc = std::system((exe.string() + " datagen " + args + " >/dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  const std::string ni = tmp / "ni.h5", cf = tmp / "cosmo";
  REQUIRE(run("neuron-inverter --out " + ni + " --train 8 --val 4 --test 4 --time-bins 32") == 0);
  const auto size = fs::file_size(ni);
  REQUIRE(run("neuron-inverter --out " + ni + " --train 4 --val 4 --test 4 --time-bins 32") == 2);  // exists
  REQUIRE(fs::file_size(ni) == size);                                                               // untouched
  REQUIRE(run("neuron-inverter --out " + ni + " --train 4 --val 4 --test 4 --time-bins 32 --force") == 0);
  REQUIRE(NeuronInverterFile::open(ni).info(Split::Train).n == 4);
  REQUIRE(run("neuron-inverter --out " + ni + " --dtype float8") == 2);
  REQUIRE(run("neuron-inverter --out " + ni + " --train -3") == 2);
  REQUIRE(run("neuron-inverter --train 3") == 2);  // --out is required
  // A seed is an unsigned 64-bit number: -1 wrapped and a too large one was
  // clamped, silently (CLI11's strtoull).
  REQUIRE(run("neuron-inverter --out " + ni + "x --seed -1") == 2);
  REQUIRE(run("neuron-inverter --out " + ni + "x --seed 99999999999999999999") == 2);
  REQUIRE(run("neuron-inverter --out " + ni + "x --seed 12abc") == 2);
  REQUIRE_FALSE(fs::exists(ni + "x"));
  REQUIRE(run("cosmoflow --out " + cf + " --size 8") == 2);
  {  // ... said in plain words (CLI::PositiveNumber said "not in range 0.000000 to 1797693...")
    const std::string msg = tmp / "msg.txt";
    const int rc =
        std::system((exe.string() + " datagen cosmoflow --out " + cf + "0 --per-file 0 > " + msg + " 2>&1").c_str());
    REQUIRE((WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) == 2);
    std::ifstream in(msg);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_THAT(text, Catch::Contains("--per-file: Value 0 not in range 1 to 1000000"));
  }
  REQUIRE(run("cosmoflow --out " + cf + " --size 16 --train 3 --val 1 --test 1 --per-file 2") == 0);
  REQUIRE(CosmoFlowFiles::open(cf + "/train/*.h5").total() == 3);
  REQUIRE(run("cosmoflow --out " + cf + " --size 16 --train 3 --val 1 --test 1") == 2);
}
