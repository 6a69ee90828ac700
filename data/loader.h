// Training-data loaders: the one interface the trainer uses for every format.
//
//   auto L = data::open_loader({DataFormat::NeuronInverter, "ni.h5", Split::Train}, opts);
//   for (int64_t e = 0; e < epochs; ++e) {
//     L->start_epoch(e);
//     data::LoaderBatch b;
//     while (L->next(b)) { ... b.x [B, C, ...] float32 on opts.device, b.y [B, P] ...; io += L->wait_seconds(); }
//   }
//
// Sharding (as the original codes do it, see shared/REFERENCE.md):
//   * Neuron Inverter: rank r preloads the contiguous slice
//     [r * S, (r + 1) * S) with S = floor(N / world / B) * B, checks it for NaN/Inf once,
//     and shuffles it locally every epoch; no partial batch.
//   * CosmoFlow (authors' files, LBANN files): rank r owns the contiguous
//     samples [r * P, (r + 1) * P) in file order, P = floor(total / world):
//     whole files per rank when the files divide evenly (file-level shards),
//     else at most two files shared with a neighbour. Samples are streamed
//     from HDF5 (hyperslab of one sample), checked per batch; every rank runs
//     floor(P / B) batches (global batch = B x world), so no rank drops more
//     than one batch's worth.
// Pipeline: the process's single I/O thread (data/prefetch.h) reads and, on the
// CPU, also converts/reduces (fused kernel, kernels/fused_downsample.h; or
// shares that with io_threads - 1 converter threads) up to
// `prefetch_depth` batches ahead -- past the end of the epoch into the next
// one (prefetch_next_epoch), so that a new epoch starts without waiting for
// its first reads; on a CUDA device it fills pinned staging
// buffers with the raw samples, and next() copies them asynchronously on the
// loader's own stream and reduces them there (reduce_on device) -- or, with
// reduce_on host, reduces them on the CPU as above and ships float32 batches.
// A batch whose samples are all in RAM (a preloaded shard, a cached shard's
// later epochs, a mapped file) is made in chunks that the thread waiting for
// it in next() joins (data/chunked_work.h): a loader that is the bottleneck
// then uses the caller's cores instead of letting them wait -- also where
// the device reduces, whose chunks copy (or decode) raw samples into the
// pinned staging. Such a batch
// calls no HDF5, so it neither waits for nor delays another thread's HDF5
// calls (a checkpoint being written); reads through HDF5 hold the process's
// HDF5 lock (data/prefetch.h) one sample at a time.
// With cache_in_memory a streamed shard's samples are kept after their first
// use when they fit the process's cache budget (data/cache_budget.h) and
// cache_max_bytes, so later epochs skip the I/O: as the kernel's float32
// output when that is smaller than the stored bytes (reduced data; later
// epochs skip the reduction too), else as the stored bytes (full-resolution
// uint16 cubes; converted from RAM each epoch; and always when the GPU
// reduces). A preloaded shard (Neuron Inverter) is in RAM already: cached
// only when reducing makes it smaller, and a float32 one at full resolution
// is converted once, in place, when the loader opens.
// Order: Fisher-Yates over Philox(seed, epoch, rank) (data/shuffle.h); the
// same (seed, epoch, rank) gives the same batches whatever the thread timing,
// and restore(state()) resumes mid-epoch with the same order.
// Errors: every bad input is an mrmf::Error (kind Data, or Usage for bad
// options) naming the file, the dataset and what was expected; an error in the
// I/O thread is re-thrown by next() with its message. A batch that fails
// (read, check, conversion or copy) is lost, with or without prefetching:
// the next call returns the batch after it, so that the epoch's later batches
// keep their places in the order. Destroying a loader
// mid-epoch waits for its in-flight job (at most one batch) and never hangs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/formats.h"
#include "kernels/fused_downsample.h"

namespace mrmf::data {

enum class DataFormat { NeuronInverter, CosmoFlow, CosmoFlowLbann };
DataFormat parse_data_format(const std::string& s);  // neuron_inverter | cosmoflow | cosmoflow_lbann (Usage error)
const char* data_format_name(DataFormat f);

struct DataSpec {
  DataFormat format = DataFormat::NeuronInverter;
  // Neuron Inverter: the .h5 file. CosmoFlow: a folder (its <split>/*.h5 are
  // used, or *.h5 directly in it), a glob pattern, or a comma-separated list.
  std::string path;
  Split split = Split::Train;
};

// How the Neuron Inverter (N, T, C) frames become [C, T]: a real transpose,
// or the original code's `x.view(-1, C, T)` memory reinterpretation.
enum class NiLayout { Transpose, Reinterpret };

struct Transform {
  kernels::FusedTransform kind = kernels::FusedTransform::None;  // applied per element before averaging
  std::vector<float> scale, shift;                                // per channel, for Scale: x * scale + shift
};

// Where a CUDA loader reduces (converts) the samples: on the device, every
// batch, from raw bytes (Auto's choice there), or on the host once, keeping
// the reduced float32 samples in the cache. The CPU always reduces on the host.
enum class ReduceOn { Auto, Host, Device };
ReduceOn parse_reduce_on(const std::string& s);  // auto | host | device (Usage error)

constexpr int kMaxIoThreads = 8;  // LoaderOptions::io_threads

struct LoaderOptions {
  int64_t batch_size = 1;  // local (per rank)
  // > 0: only the split's first max_samples samples, in file order, are
  // sharded and read (data.max_train_samples: a subset of a large set).
  int64_t max_samples = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  int rank = 0, world = 1;
  Device device = Device::cpu();
  // Reduction factor per spatial axis (NI: {t}; CosmoFlow: {x=D, y=H, z=W});
  // empty = full resolution; a single value applies to every spatial axis.
  std::vector<int64_t> reduce;
  Transform transform;
  NiLayout ni_layout = NiLayout::Transpose;
  bool cache_in_memory = true;
  // CosmoFlow files whose `3Dmap` (authors' layout) or `full` (LBANN's) is
  // stored contiguously, unfiltered and little-endian (what `mrmf datagen`,
  // `mrmf downsample` and h5py write by default) are mapped into memory
  // (data/mapped_file.h) and read like a preloaded shard: every batch from
  // the page cache, in chunks any thread may take, with no staging copy by
  // the I/O thread. Samples that need a value check (float types; int16
  // under log1p) are checked the first time they are read. Chunked,
  // unfiltered files whose chunks hold whole samples are mapped the same
  // way (H5File::unit_offsets). Files gzip-compressed (with or without
  // shuffle) a sample per chunk, and files, gzip-compressed or unfiltered,
  // that split a sample over chunks few enough to locate (HDF5 1.10 walks
  // its index for each: chunks_worth_locating in data/packed_chunks.h),
  // each holding rows of that sample alone or the rows of whole samples
  // (h5py's automatic chunks; such a chunk is inflated once for each of
  // its samples), are mapped and
  // each sample decoded or put together where the
  // batch is made on the host, by whichever thread makes it (on a GPU that
  // reduces on the device too, into the raw staging; H5File::packed_units,
  // data/packed_chunks.h), and checked each time it is decoded (once where
  // the raw cache keeps it). Other files, and files past the process's
  // MRMF_MAX_MAPPED_FILES (default 16384), are read through HDF5; where
  // the chunks or filters are the reason, the loader logs why and the
  // h5repack command that rewrites such a file (data/mapped_shard.h).
  bool memory_map = true;
  // The cache draws on the process-wide budget (data/cache_budget.h); this
  // caps one loader's share on top of it (0: no cap of its own).
  int64_t cache_max_bytes = 0;
  ReduceOn reduce_on = ReduceOn::Auto;  // Device needs a CUDA device (Usage error otherwise)
  int prefetch_depth = 2;       // batches produced ahead; 0 = synchronous reads in next()
  // Once an epoch's last batch is scheduled, go on prefetching (within
  // prefetch_depth) the first batches of the epoch expected next: epoch + 1,
  // or the same epoch again when it was just started twice in a row (a
  // validation loader). start_epoch()/restore() use them when they are the
  // batches due and discard them otherwise, so the batches never change.
  bool prefetch_next_epoch = true;
  // Threads of the CPU path (with prefetch_depth > 0), 1 to kMaxIoThreads:
  // 1 -- the I/O thread reads and converts each sample; n > 1 -- n - 1
  // converter threads beside it turn the samples already read into float32
  // while the next is read (streamed formats; sample k on converter
  // k mod (n - 1)), or convert equal parts of each batch with it (a
  // preloaded shard, or raw samples in the cache). The reads stay on the
  // one I/O thread (HDF5), so past the point where it reads as fast as the
  // converters convert, more threads only take cores. More than 1 pays
  // where the loader is the bottleneck; with compute-bound training it
  // takes cores from the step.
  int io_threads = 1;
  // A batch whose samples are all in RAM (a preloaded shard, a cached one's
  // later epochs) is made in chunks of about this many output bytes (at
  // least one sample), claimed by the I/O thread, the converters and the
  // thread waiting for it in next() (data/chunked_work.h) with its OpenMP
  // team less one thread per loader thread (I/O and converters), so that
  // none of them is descheduled holding a chunk. Tests make it small, so
  // that tiny samples form many chunks.
  int64_t chunk_bytes = 64 << 10;
  // Tests: called before each such chunk, on the thread that makes it.
  std::function<void(int64_t batch, int64_t chunk)> on_chunk;
  // CUDA, with prefetch_depth > 0: the I/O thread also copies each batch to
  // the GPU (and reduces it there with reduce_on device), into device
  // buffers the loader owns, so that the copy overlaps the steps before it
  // instead of being waited for in next(). Experimental: not yet run on a
  // GPU (the trainer sets it from MRMF_OVERLAP_H2D=1).
  bool overlap_h2d = false;
};

struct LoaderBatch {
  Tensor x;            // float32 [B, C, spatial...] channels-first, on opts.device
  Tensor y;            // float32 [B, P], on opts.device
  int64_t index = -1;  // batch index within the epoch
};

struct LoaderState {
  int64_t epoch = 0;
  int64_t batch = 0;  // next batch to be returned
  uint64_t seed = 0;
};

class Loader {
 public:
  virtual ~Loader() = default;
  // Starts epoch `epoch` at its first batch (cancels an unfinished epoch).
  virtual void start_epoch(int64_t epoch) = 0;
  // Next batch of the epoch; false when the epoch is over. The caller may keep
  // the tensors: they are allocated per batch, or (overlap_h2d) device
  // buffers the loader reuses only once nobody else holds them. As with any
  // device tensor, release a batch only after the GPU work on it is done.
  virtual bool next(LoaderBatch& out) = 0;
  virtual int64_t batches_per_epoch() const = 0;
  int64_t samples_per_epoch() const { return batches_per_epoch() * batch_size(); }  // local
  virtual int64_t batch_size() const = 0;
  virtual int64_t local_samples() const = 0;  // size of this rank's shard
  virtual bool caching() const = 0;           // the shard (preloaded, or cached) is in memory after its first epoch
  virtual Shape sample_shape() const = 0;     // [C, spatial...] after reduction
  virtual int64_t num_labels() const = 0;     // P
  // Seconds next() spent on data since start_epoch(): blocked, or making
  // chunks of a batch from RAM that was not ready yet (its own threads'
  // share of the loader's work, done while they would have waited).
  virtual double wait_seconds() const = 0;
  virtual LoaderState state() const = 0;
  // Resumes at state.batch of state.epoch with the same order (seed must match).
  virtual void restore(const LoaderState& state) = 0;
  // Global sample ids (file-order index within the split) of this rank's
  // shard, in local order; for tests and diagnostics.
  virtual const std::vector<int64_t>& shard_ids() const = 0;
};

// What open_loader() checks before it reads any sample, alone: the options,
// the split's files and datasets, a shard of at least one batch for
// opts.world ranks, reduce_on against the device. For checks before a long
// job (an experiment's later stages), where opening a loader would preload.
void check_loader(const DataSpec& spec, const LoaderOptions& opts);
std::unique_ptr<Loader> open_loader(const DataSpec& spec, LoaderOptions opts);

// The stored per-sample shape [C, spatial...] of a split, from the file
// metadata alone (no data is read): for validating resolution ladders.
Shape dataset_sample_shape(const DataSpec& spec);

// The files of a CosmoFlow split, in the order the loaders read them: a
// folder means <folder>/<split>/*.h5 (or *.h5 in it), anything else a glob
// or a comma-separated list. A Data error naming the split where none match.
std::vector<std::string> cosmoflow_split_files(const DataSpec& spec);

// What a data set is, for `mrmf experiment --resume` to tell whether the data
// changed: "<N> samples of <shape> <dtype>, labels #<hash of the first 256
// labels>" (data/fingerprint.cpp). Reads metadata and labels only.
std::string data_fingerprint(const DataSpec& spec);
// How many samples the split holds, all ranks' together (metadata only):
// for saying how many of them the loaders' whole batches leave out.
int64_t split_samples(const DataSpec& spec);

}  // namespace mrmf::data
