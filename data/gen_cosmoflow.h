// Synthetic CosmoFlow-like data: 4-channel 3-D count cubes whose statistics
// depend smoothly on 4 "cosmological" parameters, written in the MRMF authors'
// layout (`3Dmap` (n, D, H, W, 4) uint16, `unitPar` (n, 4) float32).
//
// Per sample, u in [-1, 1]^4 in the order of the real files [Omega_m, sigma8, n_s, H0]:
//   sigma8 -> amplitude of the Gaussian field (its rms is normalised to sigma8 / 0.8),
//   n_s    -> spectral slope k^ns below the turnover,
//   Omega_m and H0 -> turnover k0 ~ Omega_m * h (the shape parameter Gamma);
//   Omega_m also sets how fast structure grows between the 4 "redshift" channels
//   (growth rate ~ Omega_m^0.55) and H0 sets the mean count per voxel (~ h^3), so
//   that all four parameters are separately identifiable.
// The field is white noise (Philox) -> r2c FFT -> sqrt(P(k)) -> c2r FFT; each
// channel is delta_c = D_c * delta, a lognormal density exp(delta_c - var_c / 2),
// and Poisson counts (normal approximation for means >= 32), clamped to 65535.
// Voxels have a fixed physical size, so a larger cube is a larger volume, like
// crops of one simulation. Every random number is a pure function of
// (seed, split, sample, voxel), so the output is identical for any thread count.
// FFTW plans use FFTW_ESTIMATE (FFTW_MEASURE could pick different algorithms on
// different runs and break bit-reproducibility).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/formats.h"

namespace mrmf::data {

struct CosmoGenOptions {
  int size = 32;  // cube side, 16..512
  int64_t train = 1024, val = 128, test = 128;
  uint64_t seed = 1;
  int per_file = 128;  // samples per HDF5 file
  int threads = 0;     // OpenMP threads; 0 = runtime default
  // Called from the calling thread after each block of samples.
  std::function<void(int64_t done, int64_t total)> progress;
  // Several processes (MPI ranks) share the work by files: this one writes
  // the files whose index over all splits is `rank` mod `ranks`. `barrier`
  // (required when ranks > 1) holds every rank until all have written their
  // files, which are then renamed into place; only rank 0 removes earlier
  // files the new set does not have (with overwrite).
  int rank = 0, ranks = 1;
  std::function<void()> barrier;
};

struct CosmoGenSummary {  // of the files this process wrote
  int64_t samples = 0, files = 0, bytes = 0;
  double seconds = 0;
};

// Physical parameters of a unit vector u (the mapping above), for meta data and tests.
struct CosmoParams {
  double omega_m, sigma8, n_s, h;
};
CosmoParams cosmo_params_from_unit(const float u[4]);

// One sample: counts [D, H, W, 4] (size^3 * 4 uint16) and unit labels [4].
// `split` and `index` select the random streams. Thread-safe.
void cosmoflow_sample(int size, uint64_t seed, Split split, int64_t index, uint16_t* counts, float* unit_params);

// Writes <out_dir>/{train,val,test}/cosmo_NNN.h5 (each file atomically).
// Existing cosmo_*.h5 files are an error unless `overwrite`: then they are
// replaced once the whole new set is written (a run that fails leaves them
// as they were), and those the new set does not have are removed.
CosmoGenSummary generate_cosmoflow(const std::string& out_dir, const CosmoGenOptions& opts, bool overwrite = false);

// The file name of the k-th file of a split: "<out>/train/cosmo_000.h5".
std::string cosmoflow_file_name(const std::string& out_dir, Split split, int64_t k);

}  // namespace mrmf::data
