// The loader's data sources (private to data/loader*.cpp): one rank's shard of
// a split, per-sample raw reads and the labels; see data/loader.h for the
// sharding rules. Split from loader.cpp to keep each file about one thing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/loader.h"
#include "kernels/fused_downsample_ops.h"

namespace mrmf::data::detail {

// One rank's shard of a split: per-sample raw reads (the I/O thread, or the
// caller when synchronous; read_raw() holds hdf5_mutex around its HDF5
// calls, data/prefetch.h -- or, for a source whose samples are all in RAM,
// any thread that makes a chunk of a batch), labels in RAM, and the
// geometry the fused kernel needs.
struct Source {
  virtual ~Source() = default;
  std::string file, dataset;        // for messages
  DType dtype = DType::F32;
  std::vector<int64_t> raw;         // per-sample kernel input shape ([s..., C] or [C, s...])
  kernels::InputLayout layout = kernels::InputLayout::ChannelsLast;
  std::vector<int64_t> spatial;     // spatial lengths in kernel order
  std::vector<std::string> axis_names;
  int64_t channels = 0, params = 0;
  std::vector<int64_t> ids;         // global ids of the local samples
  Tensor labels;                    // [n_local, P] float32
  int64_t common_batches = 0;       // batches every rank can run
  bool log1p = false;               // data.transform log1p: values must be > -1
  int64_t count() const { return static_cast<int64_t>(ids.size()); }
  int64_t raw_elems() const {
    int64_t e = 1;
    for (int64_t d : raw) e *= d;
    return e;
  }
  int64_t raw_bytes() const { return raw_elems() * static_cast<int64_t>(dtype_size(dtype)); }
  // Preloaded (and mapped) sources hand out pointers into RAM; streamed
  // ones copy into dst. Where raw_ptr() serves samples, read_raw() calls no
  // HDF5 and may run on any thread, for distinct samples at once (the
  // device's raw batches are made so, data/loader_batches.cpp).
  virtual const void* raw_ptr(int64_t /*local*/) const { return nullptr; }
  // Writable bytes of a preloaded sample (the loader may convert them in place).
  virtual void* mutable_raw_ptr(int64_t /*local*/) { return nullptr; }
  virtual void read_raw(int64_t local, void* dst) = 0;
  // Whether every sample is in RAM but must be decoded (chunks of a mapped
  // file, compressed or splitting a sample, data/packed_chunks.h): read_raw() then calls no HDF5
  // and may run on any thread, for distinct samples at once.
  virtual bool decodes_in_ram() const { return false; }
  // Called before a batch converts sample `local` from raw_ptr(), by the
  // thread converting it: a source whose bytes in RAM were never checked
  // (check_values; a mapped file) checks them here. Distinct samples may be
  // checked at the same time on different threads.
  virtual void check_ram_sample(int64_t /*local*/) {}
  // NaN/Inf (float types) and, with log1p, values <= -1 among `n` raw
  // samples at `p`: a Data error naming `what` and the index.
  void check_values(const void* p, int64_t n, const std::string& what) const;
  // Whether check_values() looks at anything (integer counts without log1p
  // are always valid).
  bool needs_value_check() const { return dtype == DType::F32 || dtype == DType::F16 || log1p; }
};

// Opens the shard of `spec` for `o.rank` (hdf5_mutex held by the caller).
std::unique_ptr<Source> open_source(const DataSpec& spec, const LoaderOptions& o);
// What open_source checks from metadata alone (files, datasets, a shard of
// at least one batch for o.world ranks), reading no sample.
void check_source(const DataSpec& spec, const LoaderOptions& o);

// The files of a CosmoFlow split: <path>/<split>/*.h5, <path>/*.h5, a glob or a list.
std::vector<std::string> cosmo_paths(const DataSpec& spec);

// Every file a loader reads from CosmoFlow folder `root`, over all splits,
// as paths relative to it, sorted: the *.h5 files (not hidden) directly in
// train/, val/ and test/ where any of these exists, else those directly in
// `root`. What `mrmf downsample` copies: files elsewhere (other subfolders)
// are read by no split. `*ignored` (may be null) receives the other *.h5
// files below `root`.
std::vector<std::string> cosmo_folder_files(const std::string& root, std::vector<std::string>* ignored = nullptr);

}  // namespace mrmf::data::detail
