// The mapped shard of a CosmoFlow loader (private to data/loader*.cpp): the
// files of one rank's shard mapped into memory, each sample where it lies
// -- in place, or in chunks to decode or put together -- and the checks that
// decide whether a shard can be read so. Split from loader_sources.cpp to
// keep each file about one thing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/h5file.h"
#include "data/mapped_file.h"
#include "data/packed_chunks.h"

namespace mrmf::data::detail {

// One mapping per file, and the kernel's count of mappings per process is
// limited (vm.max_map_count, 65530 by default; malloc, thread stacks and
// the CUDA driver need some too): the loaders of a process map at most
// 16384 files in all (LBANN's one sample per file makes many), or
// MRMF_MAX_MAPPED_FILES (a node with a raised vm.max_map_count), and read
// what would pass it through HDF5. Read at every loader's set-up.
int64_t max_mapped_files();

// A sample where it lies in a mapped file: its bytes as they are, or its
// chunk (H5File::packed_units, data/packed_chunks.h: compressed, or one of
// several that split it) -- the first of its chunks, the others following
// it in MappedShard::samples.
struct MappedSample {
  const char* p = nullptr;
  int64_t stored = 0;    // bytes at p
  uint32_t skipped = 0;  // packed: the chunk's filter mask
  bool packed = false, shuffle = false;
};

// The files of a shard mapped into memory (LoaderOptions::memory_map): each
// file's samples read where they lie in the page cache, by any thread that
// takes a chunk of a batch (data/mapped_file.h says why). All of the shard's
// files or none: the source serves every sample from them or none. Move-only;
// holds its share of max_mapped_files() until destroyed.
class MappedShard {
 public:
  std::vector<MappedFile> maps;
  // Per file index, its samples (empty outside the shard): a sample in
  // several chunks takes grids[file].chunks_per_unit() entries, its chunks
  // in the grid's order; samples sharing chunks (grids[file].units_per_chunk
  // of them) share those entries.
  std::vector<std::vector<MappedSample>> samples;
  std::vector<ChunkGrid> grids;  // per file index; empty: a sample is one entry
  bool packed = false;           // whether any sample is in chunks to decode or put together

  MappedShard() = default;
  MappedShard(MappedShard&& o) noexcept
      : maps(std::move(o.maps)),
        samples(std::move(o.samples)),
        grids(std::move(o.grids)),
        packed(o.packed),
        reserved_(std::exchange(o.reserved_, 0)) {}
  MappedShard& operator=(MappedShard&& o) noexcept {
    if (this != &o) {
      maps = std::move(o.maps);  // unmaps this shard's files
      samples = std::move(o.samples);
      grids = std::move(o.grids);
      packed = o.packed;
      release();
      reserved_ = std::exchange(o.reserved_, 0);
    }
    return *this;
  }
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;
  ~MappedShard() { release(); }

  bool empty() const { return samples.empty(); }
  const MappedSample& sample(size_t file, int64_t row) const {
    return samples[file][static_cast<size_t>(row / grids[file].units_per_chunk * per_sample(file))];
  }
  int64_t per_sample(size_t file) const { return grids[file].unit.empty() ? 1 : grids[file].chunks_per_unit(); }
  // Takes n of the process's `limit` mappings; false, taking none, when
  // fewer are left.
  bool reserve(int64_t n, int64_t limit) {
    int64_t cur = in_use().load();
    do {
      if (cur + n > limit) return false;
    } while (!in_use().compare_exchange_weak(cur, cur + n));
    reserved_ += n;
    return true;
  }
  static int64_t files_in_use() { return in_use().load(); }

 private:
  static std::atomic<int64_t>& in_use() {
    static std::atomic<int64_t> n{0};  // trivially destructible: safe at static exit
    return n;
  }
  void release() noexcept { in_use() -= std::exchange(reserved_, 0); }
  int64_t reserved_ = 0;
};
struct MapRequest {
  size_t file;                   // index into the paths
  std::vector<int64_t> offsets;  // H5File::unit_offsets of the dataset's samples, or
  PackedUnits packed;            // their chunks (compressed, or splitting them); neither: not mappable
  DType dtype;                   // as read, and
  int64_t rows_per_sample;       // for layout_advice() where it is not
};
// The request for `dataset` of file index `file`, opened as `h`: its samples in
// place, else in chunks (H5File::packed_units), else neither.
MapRequest map_request(const H5File& h, size_t file, const std::string& dataset, DType dt, int64_t rows_per_sample);

// For compressed chunks that hold the rows of several whole samples
// (h5py's automatic chunk shape for compression="gzip" on small files),
// mapped with grid `g`: each sample's read inflates its whole chunk, so a
// file costs g.units_per_chunk times the work of one stored a sample per
// chunk. Said once per loader whose mapping is kept, with the h5repack
// command that removes the cost.
std::string shared_chunks_notice(const std::string& path, const std::string& dataset, const ChunkGrid& g);

// For a dataset read as `dtype` in samples of `rows_per_sample` rows that
// the loaders can neither map nor decode themselves: whether its chunk
// shape or its filters are the reason -- a chunk holding rows of parts of
// two samples (compressed, or unfiltered and splitting them), a chunk of
// whole samples too large to inflate for one (kMaxSharedChunkBytes), more
// chunks than are worth locating (chunks_worth_locating), a filter only
// HDF5 decodes; and, beside another reason, compressed chunks of whole
// samples (HDF5's cost) -- and the h5repack command (hdf5-tools) that
// rewrites such a file so that they can: a sample per chunk, or contiguous
// where the file is unfiltered or a chunk per sample would itself be too
// many chunks.
// Empty where rewriting the chunks would not help: not chunked; chunked as
// the loaders take it (so a chunk never written); another type, byte
// order or a user block (h5repack keeps them); a row count that is not a
// multiple of rows_per_sample; unfiltered chunks of whole rows holding
// rows of several samples (so not stored back to back). Asked only about
// files the loaders did not map (map_shard()). Why: such files stay correct
// through HDF5 but are read on one thread, and a user with compressed
// files from h5py's automatic chunking (chunks that split a sample, often
// holding rows of several) would not otherwise learn why the loader is
// slow or how to fix it.
std::string layout_advice(const H5File& h, const std::string& dataset, DType dtype, int64_t rows_per_sample);

// Maps the requested files of `paths`; an empty shard, the reason logged
// (layout_advice() at info where it has one), when any of them cannot be
// mapped.
MappedShard map_shard(const std::vector<std::string>& paths, const std::vector<MapRequest>& want,
                      const std::string& dataset, int64_t sample_bytes);

// Sample `row` of file index `file` of the mapped shard, `bytes` bytes of
// `dt`, into dst: copied, or its chunk or chunks decoded. Any thread.
void read_mapped(const MappedShard& m, size_t file, int64_t row, int64_t bytes, DType dt, void* dst,
                 const std::string& what);

// The mapping's meaning checked against HDF5 itself: sample `sample` of
// file index `file`, `rows` rows of `dataset` from row `sample * rows` on,
// read both ways.
bool mapping_agrees(const std::string& path, const std::string& dataset, const MappedShard& m, size_t file,
                    int64_t sample, int64_t rows, DType dt, int64_t bytes);

}  // namespace mrmf::data::detail
