// A chunked dataset in HDF5's original format (layout message version 3,
// what h5py and libhdf5 write by default) finds its chunks through a
// version-1 B-tree whose keys hold each chunk's stored size and filter
// mask. None of it carries a checksum, and libhdf5 1.10 trusts it: a mask
// damaged to say that a compressed chunk skipped its filters makes
// libhdf5 copy a whole chunk out of the few stored bytes -- past the end
// of its buffer (session 61's fuzzing: garbage written by `downsample`,
// or SIGSEGV), whether the chunks hold whole samples or parts of them.
// The check below walks such a B-tree from the file's bytes, before
// libhdf5 opens the file (called by the group walk of
// h5_symbol_table_check.h for each chunked dataset it meets).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/h5_file_extents.h"
#include "data/h5_raw_bytes.h"

namespace mrmf::data {

// What the walk needs of one chunked dataset's object header.
struct ChunkedLayout {
  std::string dataset;          // its path in the file, for messages
  uint64_t message_at = 0;      // the layout message's file offset, for messages
  uint64_t tree = 0;            // the B-tree's address (from the base address)
  std::vector<uint64_t> chunk;  // the chunk's dimensions, the element size in bytes last
  // Mask bits of the filters that change a chunk's size (all but shuffle;
  // 0 without a filter pipeline message); none where that message could
  // not be read (no check of the chunks' sizes then).
  std::optional<uint32_t> resizing = 0;
  // From the dataspace and datatype messages, where found: the dataset's
  // dimensions, its maximum ones (kUnlimited: none), its element's bytes.
  std::optional<std::vector<uint64_t>> dims, max_dims;
  std::optional<uint64_t> element;
  uint32_t owner = 0;  // its id in ChunkIndexWalk::extents
};
constexpr uint64_t kUnlimited = ~uint64_t{0};

// The chunked layout in a layout message's `size` bytes at `m`; none for
// other layouts or versions (contiguous, compact; version 4's indexes are
// checksummed) or a message too short for what it says.
std::optional<ChunkedLayout> parse_chunked_layout(const unsigned char* m, uint64_t size);
// A contiguous layout's data address (from the base address) and size
// (layout message versions 3 and 4); none for other layouts, data not yet
// allocated, or a message too short for what it says.
std::optional<std::pair<uint64_t, uint64_t>> parse_contiguous_layout(const unsigned char* m, uint64_t size);
// The size-changing filters of a filter pipeline message (versions 1 and
// 2) as mask bits; none when the message is too short for what it says.
std::optional<uint32_t> parse_resizing_filters(const unsigned char* m, uint64_t size);
// Fills layout.dims and layout.max_dims from a dataspace message (versions
// 1 and 2; a simple dataspace), layout.element from a datatype message;
// leaves them unset when the message is not one of these or too short.
void parse_dataspace(const unsigned char* m, uint64_t size, ChunkedLayout& layout);
void parse_element_size(const unsigned char* m, uint64_t size, ChunkedLayout& layout);

// The bounds the walk keeps and where it reads. `budget` (bytes left to
// read for all chunk indexes of the file) is spent by the walk; past it,
// check_chunk_index throws ChunkBudgetSpent (no verdict on the rest).
struct ChunkIndexWalk {
  const RawFileBytes& file;
  const std::string& path;  // for messages
  uint64_t base = 0;        // file offset of address 0
  uint64_t two_k = 64;      // entries per node at most: twice the superblock's indexed-storage K
  uint64_t budget = 0;
  FileExtents* extents = nullptr;  // where the nodes and chunks it finds are recorded, if anywhere
};
struct ChunkBudgetSpent {};

// Checks the chunk's shape first, as libhdf5 checked it when the dataset
// was made: a dimension more than the dataspace's, none 0, the element
// size the datatype's, and -- where chunks are compressed -- none past a
// fixed maximum (libhdf5 1.10 does not check it again when it reads, and
// a damaged chunk dimension made it copy a chunk far past its inflated
// bytes: session 62's fuzzing); and the dataspace within its maximum.
// Then walks the dataset's B-tree: each node inside the file, a chunk
// B-tree node of the level its parent says, no more entries than the file
// allows, none reached twice, its keys in order; each chunk's offsets on
// the chunk grid and inside the dataset, its stored bytes inside the
// file; and no chunk that went through no size-changing filter -- none in
// the dataset's pipeline, or its mask says it skipped them -- stored in
// fewer bytes than a whole chunk (libhdf5 allocates what the index says
// and copies a whole chunk out: a damaged pipeline message's type, which
// hid deflate, crashed it too). Throws a Data error naming the file, the
// dataset and the structure's file offset otherwise.
void check_chunk_index(ChunkIndexWalk& walk, const ChunkedLayout& layout);

}  // namespace mrmf::data
