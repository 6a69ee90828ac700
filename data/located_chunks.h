// Where a file's chunks lie (H5File::packed_units), found once per process
// for each file: the loaders' set-up looks each chunk up, and in HDF5 1.10
// a lookup walks the chunk index (data/packed_chunks.h: ~8 ns x n^2 for n
// chunks, 2.1 s for h5py's chunks of a file of 128 cubes of 128^3), while
// an experiment opens a loader over the same files for every stage it
// trains, training and validation alike. Private to the loaders
// (data/mapped_shard.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "data/h5file.h"

namespace mrmf::data::detail {

// h.packed_units(dataset, dtype, rows_per_unit), from this process's
// record of an earlier answer for the same file where there is one and it
// still holds: the same path, dataset, type and rows, the same file as the
// open handle sees it (device, inode, size, modification time), the same
// shape, and its first, middle and last listed chunks still where the
// answer says (three lookups). Else looked up, and recorded where it found
// from kRecordedFromChunks chunks (fewer are cheap to find again) to a
// quarter of kMaxRecordedChunks; past that many chunks in all, the least
// recently used answers are dropped. So a file is located once per process
// while it stays so and the record holds it. Thread-safe (takes
// hdf5_mutex(), then the record's lock).
PackedUnits located_chunks(const H5File& h, const std::string& dataset, DType dtype, int64_t rows_per_unit);
constexpr int64_t kRecordedFromChunks = 512;              // ~2 ms of lookups at HDF5 1.10's ~8 ns x n^2
constexpr int64_t kMaxRecordedChunks = int64_t{1} << 24;  // 24 bytes each (~400 MiB), plus a record's own few
// Answers served from the record (for tests), and the record dropped.
int64_t located_chunks_reused();
void forget_located_chunks();

}  // namespace mrmf::data::detail
