// Decoding an HDF5 chunk compressed by the deflate filter, after the shuffle
// filter where the dataset has it (h5py's compression="gzip", with or without
// shuffle=True), from its stored bytes alone -- no HDF5 call; and putting a
// sample together from the chunks that split it, compressed or not.
//
// Why: serial HDF5 decompresses on the one thread that calls it (every HDF5
// call of a process goes through one lock, data/prefetch.h), so a loader of
// gzip-compressed CosmoFlow files ran at the speed of one inflate, and one
// of files whose chunks split each sample (compressed or not) at the speed
// of one thread gathering the pieces. With the file mapped and each chunk's
// place known (H5File::packed_units), every thread that takes a part of a
// batch decodes or puts together its own samples (data/mapped_shard.cpp,
// data/loader_batches.cpp).
//
// The deflate filter stores a zlib stream (compress2); the shuffle filter
// stores byte j of every element before byte j + 1 of any. The inflate is
// libdeflate's (zlib format, checksum checked); the unshuffle is that byte
// transpose back.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace mrmf::data {

// The filter mask packed_units() records for the chunks of an unfiltered
// dataset: every filter skipped, so that decode_chunk() takes the chunk as
// it is stored (with shuffle false).
constexpr uint32_t kNoFilterApplied = ~0u;

// The chunk's `src_bytes` stored bytes at `src` into exactly `out_bytes` at
// `out`. `shuffle`: the dataset's pipeline is shuffle (filter 0) then
// deflate (filter 1), else deflate alone (filter 0); `skipped` is the
// chunk's filter mask (bit i set: filter i was not applied to it);
// `elem_size` the element size the shuffle used. Thread-safe. A Data error
// naming `what` when the bytes do not decode to out_bytes (corrupt or
// truncated data).
void decode_chunk(const char* src, int64_t src_bytes, uint32_t skipped, bool shuffle, int64_t elem_size, char* out,
                  int64_t out_bytes, const std::string& what);

// Whether `e` is decode_chunk's error for a chunk whose filter mask says
// "stored unfiltered" in fewer bytes than it stands for: damage on
// which libhdf5 1.10 copies past its buffer (SIGSEGV in H5Dread; session
// 61's fuzzing of a chunk index's filter-mask byte), so no reader may fall
// back to libhdf5 for it.
bool is_unfiltered_size_error(const Error& e);
// The words of that error, for the readers that raise it.
const char* stored_unfiltered_phrase();

// A unit (a sample) stored in chunks other than itself: the
// unit's shape, the chunk shape (chunks at the far edges are stored whole,
// as HDF5 does, and may be larger than the unit), and the count of chunks
// per unit that follows. A chunk holds rows of one unit, or along axis 0
// the rows of `units_per_chunk` whole units (then chunk[0] is that many
// times unit[0]).
struct ChunkGrid {
  std::vector<int64_t> unit, chunk;
  int64_t units_per_chunk = 1;
  int64_t chunks_per_unit() const;
};
// How chunks of `chunk0` rows along axis 0 meet the units (samples) of
// `unit_rows` rows of a dataset of `rows` rows: each chunk within one unit
// (or the dataset is a single unit), each holding the rows of whole units
// (`units_per_chunk` of them, at least 2), or parts of two units: the
// layout H5File::packed_units refuses, and that layout_advice names where
// the chunks are compressed or also split a sample along other axes.
struct ChunkRows {
  enum Kind { InUnit, WholeUnits, PartsOfUnits } kind = InUnit;
  int64_t units_per_chunk = 1;
};
ChunkRows chunk_rows(int64_t rows, int64_t unit_rows, int64_t chunk0);

// Whether the loaders locate a dataset's `chunks` chunks themselves
// (H5File::packed_units: one H5Dget_chunk_info_by_coord each) to decode
// them on every thread, or leave the dataset to HDF5. Why a limit: HDF5's
// H5Dget_chunk_info_by_coord walks the chunk index until it meets the
// chunk (1.10.8, Debian 12's: 6-10 ns per chunk of the dataset per lookup,
// measured on 4096, 16384 and 32768 chunks; 1.14's source walks it too,
// where H5Dchunk_iter -- 1.12.3 and later, not in 1.10.8 -- would list
// them all in one walk), so finding n chunks takes ~8 ns x n^2 at every
// loader's set-up (2.1 s for 16384). They are located where that costs no
// more than one read of the dataset through HDF5 would -- ~4 ns a byte
// inflated (zlib, one thread), ~0.5 ns a byte gathered from unfiltered
// chunks, and a chunk holding `units_per_chunk` samples decoded once for
// each -- or where there are at most kAlwaysLocatedChunks (~0.13 s).
// `chunk_bytes`: a chunk's size decoded.
// And never more than kMaxLocatedChunks (24 bytes each in PackedUnits, 24
// in a mapped shard).
constexpr int64_t kAlwaysLocatedChunks = 4096, kMaxLocatedChunks = int64_t{1} << 24;
bool chunks_worth_locating(double chunks, int64_t chunk_bytes, int64_t units_per_chunk, bool compressed);
// The estimate above for `chunks` lookups, in seconds (for telling a user).
inline double chunk_lookup_seconds(double chunks) { return 8e-9 * chunks * chunks; }

// How the chunks of a dataset of `dims`, chunked as `chunk` (elements of
// `elem_size` bytes), divide among its samples of `unit_rows` rows (a
// divisor of dims[0]), counted in double (a sparse dataspace's counts may
// overflow int64): one count for H5File::packed_units, which decides by
// it, and layout_advice, which says why it decided so.
struct ChunkCount {
  ChunkRows rows;          // how chunks meet samples along axis 0
  double chunks = 0;       // in the dataset
  double per_unit = 0;     // that a sample lies in (at least, where chunks hold parts of two)
  double chunk_bytes = 0;  // of one chunk, decoded
  // Samples a chunk holds, of those the dataset has (chunks of whole
  // samples; else 1): each inflated again for each by HDF5 and the loaders.
  int64_t sharing = 1;
  // chunks_worth_locating(), at most kMaxLocatedChunks chunks, of a size
  // an int64 holds; false for chunks holding parts of two samples.
  bool worth_locating(bool compressed) const;
};
ChunkCount count_chunks(const std::vector<int64_t>& dims, const std::vector<int64_t>& chunk, int64_t unit_rows,
                        int64_t elem_size);

// The next index of a row-major walk over a grid of `count` per axis, in
// place; false, back at all zeros, after the last.
inline bool next_in_grid(std::vector<int64_t>& at, const std::vector<int64_t>& count) {
  for (size_t i = at.size(); i-- > 0;) {
    if (++at[i] < count[i]) return true;
    at[i] = 0;
  }
  return false;
}

// One stored chunk: its bytes and filter mask.
struct StoredChunk {
  const char* p;
  int64_t bytes;
  uint32_t skipped;
};
// The unit's chunks -- `chunk_at(k)` for k in row-major order of their
// place in the unit -- each decoded (decode_chunk; one stored unfiltered is
// read where it lies) and its part inside the unit copied to where it lies
// in `out`, the unit's row-major `out_bytes`. `first_row`: where the unit's
// rows start along axis 0 of chunks it shares with other units (0 else).
// Thread-safe; a Data error naming `what` and the chunk as decode_chunk's.
void decode_unit(const ChunkGrid& g, const std::function<StoredChunk(int64_t)>& chunk_at, bool shuffle,
                 int64_t elem_size, char* out, int64_t out_bytes, const std::string& what, int64_t first_row = 0);

}  // namespace mrmf::data
