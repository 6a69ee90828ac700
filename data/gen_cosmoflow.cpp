#include "data/gen_cosmoflow.h"

#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "core/log.h"
#include "core/output_paths.h"
#include "data/cache_budget.h"
#include "kernels/philox.h"

namespace fs = std::filesystem;

namespace mrmf::data {
namespace {

using kernels::philox4x32_10;
constexpr double kTwoPi = 6.283185307179586;
constexpr float kGrowthBase[4] = {1.0f, 0.8f, 0.6f, 0.45f};  // D(z) of the 4 "redshift" channels

// Random streams: one per (split, sample, purpose).
enum Purpose : uint64_t { kParams = 0, kNoise = 1, kCounts = 2 };
uint64_t stream_id(Split s, int64_t index, Purpose p) {
  return (static_cast<uint64_t>(s) << 56) | (static_cast<uint64_t>(index) << 4) | p;
}

kernels::Philox4x32 philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// (0, 1): never exactly 0 or 1, so logs and inverse CDFs stay finite.
inline double open_unit(uint32_t x) { return (static_cast<double>(x >> 8) + 0.5) * (1.0 / 16777216.0); }

// Inverse standard normal CDF (Acklam's rational approximation, |rel err| < 1.2e-9).
double inv_normal_cdf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - 0.02425) return -inv_normal_cdf(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// Poisson(mean) by inversion of one uniform; normal approximation for large means.
uint16_t poisson_count(double mean, double u) {
  if (mean >= 32.0) {
    const double k = std::floor(mean + std::sqrt(mean) * inv_normal_cdf(u) + 0.5);
    return static_cast<uint16_t>(std::clamp(k, 0.0, 65535.0));
  }
  double p = std::exp(-mean), cdf = p;
  int k = 0;
  while (u > cdf && k < 200) {
    ++k;
    p *= mean / k;
    cdf += p;
  }
  return static_cast<uint16_t>(k);
}

// FFTW plans, one pair per cube size. The planner is not thread-safe: plans
// are created under a mutex and then only executed (new-array API), which is.
struct Plans {
  fftwf_plan r2c = nullptr, c2r = nullptr;
};
// Destroyed at exit with FFTW's own planner memory (fftwf_cleanup), so that
// a leak checker (the debug preset's sanitizers) sees none: left to the OS,
// every datagen run ended with LeakSanitizer's exit code 1.
struct PlanCache {
  std::mutex mu;
  std::map<int, Plans> plans;
  ~PlanCache() {
    for (auto& [n, p] : plans) {
      fftwf_destroy_plan(p.r2c);
      fftwf_destroy_plan(p.c2r);
    }
    fftwf_cleanup();
  }
};
Plans plans_for(int n) {
  static PlanCache pc;
  std::lock_guard<std::mutex> lock(pc.mu);
  auto& cache = pc.plans;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  const size_t nr = static_cast<size_t>(n) * n * n, nc = static_cast<size_t>(n) * n * (n / 2 + 1);
  float* r = fftwf_alloc_real(nr);
  fftwf_complex* c = fftwf_alloc_complex(nc);
  MRMF_CHECK(r && c, "cannot allocate FFT buffers for a ", n, "^3 cube");
  Plans p;
  p.r2c = fftwf_plan_dft_r2c_3d(n, n, n, r, c, FFTW_ESTIMATE);
  p.c2r = fftwf_plan_dft_c2r_3d(n, n, n, c, r, FFTW_ESTIMATE);
  fftwf_free(r);
  fftwf_free(c);
  MRMF_CHECK(p.r2c && p.c2r, "FFTW could not plan a ", n, "^3 transform");
  cache[n] = p;
  return p;
}

struct FftwFree {
  void operator()(void* p) const { fftwf_free(p); }
};

}  // namespace

CosmoParams cosmo_params_from_unit(const float u[4]) {
  return {0.3 + 0.1 * u[0], 0.8 + 0.2 * u[1], 0.96 + 0.5 * u[2], 0.7 + 0.1 * u[3]};
}

void cosmoflow_sample(int n, uint64_t seed, Split split, int64_t index, uint16_t* counts, float* unit) {
  MRMF_CHECK_KIND(Usage, n >= 16 && n <= 512, "cosmoflow cube size must be within 16..512, got ", n);
  // Parameters: 4 uniforms of one Philox block, mapped to [-1, 1].
  const auto pr = philox_block(seed, stream_id(split, index, kParams), 0);
  for (int i = 0; i < 4; ++i) unit[i] = static_cast<float>(2.0 * open_unit(pr.v[i]) - 1.0);
  const CosmoParams cp = cosmo_params_from_unit(unit);
  const double sigma_g = cp.sigma8 / 0.8;                     // rms of the z=0 log-density
  const double k0 = 0.8 * (cp.omega_m * cp.h) / 0.21;         // turnover, radians per voxel
  const double growth_exp = cp.omega_m / 0.3;                 // faster growth for larger Omega_m
  const double nbar = 8.0 * std::pow(cp.h / 0.7, 3.0);        // mean count per voxel

  const size_t nr = static_cast<size_t>(n) * n * n;
  const int nzc = n / 2 + 1;
  const size_t nc = static_cast<size_t>(n) * n * nzc;
  std::unique_ptr<float, FftwFree> field(fftwf_alloc_real(nr));
  std::unique_ptr<fftwf_complex, FftwFree> modes(fftwf_alloc_complex(nc));
  MRMF_CHECK(field && modes, "cannot allocate FFT buffers for a ", n, "^3 cube");
  const Plans plans = plans_for(n);

  // White noise: Box-Muller on the 4 lanes of block b -> voxels 4b .. 4b+3.
  const uint64_t noise = stream_id(split, index, kNoise);
  float* w = field.get();
  for (size_t b = 0; 4 * b < nr; ++b) {
    const auto r = philox_block(seed, noise, b);
    for (size_t k = 0; k < 4; k += 2) {
      const double rad = std::sqrt(-2.0 * std::log(open_unit(r.v[k])));
      const double ang = kTwoPi * open_unit(r.v[k + 1]);
      if (4 * b + k < nr) w[4 * b + k] = static_cast<float>(rad * std::cos(ang));
      if (4 * b + k + 1 < nr) w[4 * b + k + 1] = static_cast<float>(rad * std::sin(ang));
    }
  }
  fftwf_execute_dft_r2c(plans.r2c, field.get(), modes.get());

  // Filter by sqrt(S(k)), S = k^ns / (1 + (k/k0)^4), normalised so that the
  // field has unit variance: var = (1/N^3) sum_k S(k) over the full grid.
  auto kfreq = [n](int i) { return kTwoPi * (i <= n / 2 ? i : i - n) / n; };
  std::vector<float> amp(nc);
  double sum = 0;
  for (int x = 0; x < n; ++x)
    for (int y = 0; y < n; ++y)
      for (int z = 0; z < nzc; ++z) {
        const double kx = kfreq(x), ky = kfreq(y), kz = kTwoPi * z / n;
        const double k = std::sqrt(kx * kx + ky * ky + kz * kz);
        const double s = k > 0 ? std::pow(k, cp.n_s) / (1.0 + std::pow(k / k0, 4.0)) : 0.0;
        amp[(static_cast<size_t>(x) * n + y) * nzc + z] = static_cast<float>(s);
        sum += s * ((z == 0 || 2 * z == n) ? 1.0 : 2.0);  // r2c stores half the modes
      }
  const double scale = 1.0 / (std::sqrt(sum / static_cast<double>(nr)) * static_cast<double>(nr));
  for (size_t i = 0; i < nc; ++i) {
    const float f = static_cast<float>(std::sqrt(static_cast<double>(amp[i])) * scale);
    modes.get()[i][0] *= f;
    modes.get()[i][1] *= f;
  }
  fftwf_execute_dft_c2r(plans.c2r, modes.get(), field.get());

  // Channels: growth, lognormal, Poisson. One Philox block per voxel = 4 channels.
  double d[4], half_var[4];
  for (int c = 0; c < 4; ++c) {
    d[c] = sigma_g * std::pow(kGrowthBase[c], growth_exp);
    half_var[c] = 0.5 * d[c] * d[c];
  }
  const uint64_t cs = stream_id(split, index, kCounts);
  for (size_t v = 0; v < nr; ++v) {
    const auto r = philox_block(seed, cs, v);
    const double delta = field.get()[v];
    for (int c = 0; c < 4; ++c) {
      const double mean = nbar * std::exp(d[c] * delta - half_var[c]);
      counts[4 * v + c] = poisson_count(mean, open_unit(r.v[c]));
    }
  }
}

std::string cosmoflow_file_name(const std::string& out_dir, Split split, int64_t k) {
  char name[32];
  std::snprintf(name, sizeof name, "cosmo_%03lld.h5", static_cast<long long>(k));
  return (fs::path(out_dir) / split_name(split) / name).string();
}

CosmoGenSummary generate_cosmoflow(const std::string& out_dir, const CosmoGenOptions& o, bool overwrite) {
  const auto t0 = std::chrono::steady_clock::now();
  MRMF_CHECK_KIND(Usage, o.size >= 16 && o.size <= 512, "--size must be within 16..512, got ", o.size);
  MRMF_CHECK_KIND(Usage, o.per_file >= 1, "--per-file must be at least 1, got ", o.per_file);
  MRMF_CHECK_KIND(Usage, o.train >= 0 && o.val >= 0 && o.test >= 0 && o.train + o.val + o.test > 0,
                  "sample counts must be non-negative and not all zero");
  MRMF_CHECK(o.ranks >= 1 && o.rank >= 0 && o.rank < o.ranks && (o.ranks == 1 || o.barrier),
             "generate_cosmoflow: rank ", o.rank, " of ", o.ranks, o.barrier ? "" : " without a barrier");
  const int64_t counts[3] = {o.train, o.val, o.test};
  {
    std::error_code ec;
    MRMF_CHECK_KIND(Usage, !fs::exists(out_dir, ec) || fs::is_directory(out_dir, ec), "--out ", out_dir,
                    " is a file; CosmoFlow data sets are folders (train/, val/, test/)");
  }

  // Earlier output is refused before anything is written (every rank
  // alike), or with overwrite replaced once the new data set is whole: its
  // files are renamed over the old ones only when all are written, and old
  // files the new set does not have are removed after that (rank 0), so
  // that a failed or interrupted run leaves the earlier data set as it was
  // and a finished one leaves no stale files for the loader's glob.
  // Other .h5 files in a split's folder would be read by the loader's glob
  // together with the new ones: refused too, and with overwrite removed.
  std::vector<fs::path> earlier, others;
  for (Split s : kAllSplits) {
    const fs::path dir = fs::path(out_dir) / split_name(s);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".h5" || e.is_directory(ec)) continue;
      if (e.path().filename().string().rfind("cosmo_", 0) == 0)
        refuse_existing_output(e.path().string(), overwrite);
      else
        others.push_back(e.path());
      earlier.push_back(e.path());
    }
  }
  std::sort(others.begin(), others.end());
  MRMF_CHECK_KIND(Usage, others.empty() || overwrite, out_dir, " already holds ", others.size(),
                  " .h5 file(s) in its split folders that this generator did not write (",
                  others.empty() ? "" : others[0].string(), others.size() > 1 ? ", ..." : "",
                  "); a loader would read them together with the new files. --force removes them, or choose another "
                  "--out");

  const int64_t n = o.size, sample_elems = n * n * n * 4;
  // A sample in the making holds its counts (8 bytes a voxel) and its FFT
  // field, modes and filter (~10): 2.4 GB at 512^3, so 64 threads would need
  // 155 GB. Threads are capped to what twice the cache budget holds (by
  // default half this rank's share of the node's memory: physical / 2 /
  // ranks on the node; data/cache_budget.h).
  const int requested = o.threads > 0 ? o.threads : omp_get_max_threads();
  const int64_t per_sample = 18 * n * n * n;
  const int threads = static_cast<int>(std::clamp<int64_t>(2 * cache_budget() / per_sample, 1, std::max(requested, 1)));
  if (threads < requested)
    log::info(
        "notice: {}^3 cubes take {:.3g} GB each while they are made; {} thread(s) make them, not {} (the "
        "memory budget)",
        n, per_sample / 1e9, threads, requested);
  // Samples generated per parallel block: enough for every thread, bounded to ~512 MB.
  const int64_t budget = std::max<int64_t>(1, (int64_t{512} << 20) / (sample_elems * 2));
  CosmoGenSummary sum;
  nlohmann::json meta = {{"generator", "mrmf datagen cosmoflow"}, {"seed", o.seed}, {"size", o.size},
                         {"unitPar", {"Omega_m", "sigma8", "n_s", "H0"}},
                         {"mapping", "Omega_m=0.3+0.1u0, sigma8=0.8+0.2u1, n_s=0.96+0.5u2, h=0.7+0.1u3"}};
  plans_for(o.size);  // plan once up front, before any parallel region
  int64_t done = 0, mine = 0, file_index = 0;
  for (Split s : kAllSplits) {
    const int64_t ns = counts[static_cast<size_t>(s)];
    for (int64_t first = 0; first < ns; first += o.per_file)
      if (file_index++ % o.ranks == o.rank) mine += std::min<int64_t>(o.per_file, ns - first);
  }
  file_index = 0;
  std::vector<std::unique_ptr<AtomicOutput>> pending;
  std::set<fs::path> written;  // every rank's file names (for the stale files)
  for (Split s : kAllSplits) {
    const int64_t ns = counts[static_cast<size_t>(s)];
    for (int64_t k = 0, first = 0; first < ns; ++k, first += o.per_file)
      written.insert(fs::path(cosmoflow_file_name(out_dir, s, k)));
  }
  for (Split s : kAllSplits) {
    const int64_t ns = counts[static_cast<size_t>(s)];
    if (ns == 0) continue;
    std::error_code ec;  // ranks create the same folders at the same time
    fs::create_directories(fs::path(out_dir) / split_name(s), ec);
    MRMF_CHECK_KIND(Data, fs::is_directory(fs::path(out_dir) / split_name(s)), "cannot create ",
                    (fs::path(out_dir) / split_name(s)).string(), ": ", ec.message());
    for (int64_t k = 0, first = 0; first < ns; ++k, first += o.per_file) {
      if (file_index++ % o.ranks != o.rank) continue;
      const int64_t nk = std::min<int64_t>(o.per_file, ns - first);
      pending.push_back(std::make_unique<AtomicOutput>(cosmoflow_file_name(out_dir, s, k)));
      AtomicOutput& out = *pending.back();
      {
        H5File f = H5File::create(out.temp_path());
        f.create_dataset("3Dmap", {nk, n, n, n, 4}, DType::U16);
        f.create_dataset("unitPar", {nk, 4}, DType::F32);
        const int64_t block = std::min<int64_t>(nk, std::max<int64_t>(threads, std::min<int64_t>(budget, 64)));
        for (int64_t b0 = 0; b0 < nk; b0 += block) {
          const int64_t nb = std::min(block, nk - b0);
          Tensor maps = Tensor::empty({nb, n, n, n, 4}, DType::U16);
          Tensor labels = Tensor::empty({nb, 4}, DType::F32);
          uint16_t* mp = maps.data<uint16_t>();
          float* lp = labels.data<float>();
          // An exception must not leave an OpenMP region (std::terminate):
          // the first one is kept and thrown after it.
          std::exception_ptr failed;
          std::mutex failed_mutex;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
          for (int64_t i = 0; i < nb; ++i) {
            try {
              cosmoflow_sample(o.size, o.seed, s, first + b0 + i, mp + i * sample_elems, lp + i * 4);
            } catch (...) {
              const std::lock_guard<std::mutex> lk(failed_mutex);
              if (!failed) failed = std::current_exception();
            }
          }
          if (failed) std::rethrow_exception(failed);
          f.write_rows("3Dmap", b0, maps);
          f.write_rows("unitPar", b0, labels);
          done += nb;
          if (o.progress) o.progress(done, mine);
        }
        meta["split"] = split_name(s);
        meta["first_sample"] = first;
        f.write_string_attribute("/", "mrmf_meta", meta.dump());
        f.close();
      }
      sum.bytes += static_cast<int64_t>(fs::file_size(out.temp_path()));
      ++sum.files;
    }
  }
  if (o.ranks > 1) o.barrier();  // a rank that failed never gets here (its error aborts the job)
  for (auto& a : pending) a->commit();
  if (o.rank == 0)
    for (const auto& p : earlier)
      if (!written.count(p)) fs::remove(p);
  sum.samples = mine;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace mrmf::data
