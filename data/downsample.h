// Offline resolution reducer: writes a coarse copy of a data set in the same
// layout (same datasets, same labels, same file names) with float32 frames
// averaged over every k adjacent elements along the chosen axes. Channels are
// never averaged.
//
//   Neuron Inverter file  axes "t":           frames (N, T, C) -> (N, T/k, C)
//   CosmoFlow folder      axes from "x,y,z":  3Dmap (n, D, H, W, 4) -> (n, D/kx, H/ky, W/kz, 4)
//                         (x -> D, y -> H, z -> W; so "x" halves one axis and
//                         "x,y,z" gives 1/8 of the voxels)
//
// Files are processed in row blocks of bounded size (never a whole split in
// memory), every output file is written under a temporary name and renamed
// when complete, and existing output is never replaced without `force`.
// Every input file is validated (and every factor checked against every axis)
// before the first output file is written. The coarse copy holds the root
// attribute `mrmf_downsample` describing how it was made.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mrmf::data {

struct DownsampleOptions {
  int64_t factor = 2;
  std::string axes = "t";  // "t" (Neuron Inverter) or a comma list of x, y, z (CosmoFlow)
  bool force = false;      // replace existing output
  int64_t max_block_bytes = int64_t(64) << 20;  // input bytes per streamed row block
  std::function<void(int64_t done, int64_t total)> progress;  // samples
  // Several processes (MPI ranks) share a CosmoFlow folder by files: this one
  // writes the files whose index (sorted relative paths) is `rank` mod
  // `ranks`; every rank validates every input first. A Neuron Inverter file
  // is one output: rank 0 writes it, the others only validate. `barrier`
  // (required when ranks > 1) holds every rank until all have validated, so
  // that no rank finds another's new file "already existing".
  int rank = 0, ranks = 1;
  std::function<void()> barrier;
};

struct DownsampleSummary {  // of what this process wrote
  int64_t files = 0, samples = 0, bytes_in = 0, bytes_out = 0;
  double seconds = 0;
};

// Dispatches on the input: a regular file is a Neuron Inverter file (axes must
// be "t"), a directory is a CosmoFlow folder of authors'-layout files (every
// *.h5 under it, relative paths kept). Usage errors (bad axes / factor) are
// ErrorKind::Usage, data problems ErrorKind::Data.
DownsampleSummary downsample_dataset(const std::string& in, const std::string& out, const DownsampleOptions& opts);

DownsampleSummary downsample_neuron_file(const std::string& in, const std::string& out, int64_t factor_t,
                                         const DownsampleOptions& opts);
// factors = {kx, ky, kz} for (D, H, W).
DownsampleSummary downsample_cosmoflow_dir(const std::string& in_dir, const std::string& out_dir,
                                           const std::array<int64_t, 3>& factors, const DownsampleOptions& opts);

// The reference block average on a contiguous float32 CPU tensor of layout
// [N, s1..sk, C] (channels last), one factor per spatial axis (each must
// divide its axis): the math of the offline reducer, exposed for tests.
Tensor average_blocks_channels_last(const Tensor& x, const std::vector<int64_t>& factors);

}  // namespace mrmf::data
