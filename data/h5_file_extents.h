// Where the structures the metadata walk reads (h5_symbol_table_check.h)
// and the raw data they lead to lie in an HDF5 file. In a sound file no two
// overlap: libhdf5 allocates each object header, B-tree node, heap, chunk
// and contiguous data block its own bytes. A damaged address breaks that,
// and where nothing else can tell -- the raw data of an unfiltered dataset
// carries no checksum and no structure -- libhdf5 reads the bytes it now
// points at as data without an error: 38 of 60 changes to the low bytes of
// an unfiltered chunk's address did so (session 63), and so would a
// contiguous dataset's address moved into another dataset. Such an address
// mostly lands on bytes that belong to something else, which this finds.
// Nor may any reach past the end of the file's data the superblock
// records: libhdf5 1.10 read a label's last bytes past a lowered one as
// other values without an error (session 63's fuzzing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mrmf::data {

class FileExtents {
 public:
  enum class Kind : uint8_t {
    superblock,
    object_header,
    group_tree,
    symbol_node,
    local_heap,
    chunk_tree,
    chunk,
    contiguous
  };

  // An id for the owner of later extents, as messages name it ("dataset
  // 'g/x'", "the root group").
  uint32_t owner(const std::string& name);
  // Bytes [at, at + length) of the file hold a `kind` structure of `owner`;
  // empty ones are ignored.
  void add(uint64_t at, uint64_t length, Kind kind, uint32_t owner);
  // Throws a Data error naming `path` and two extents that overlap, or an
  // extent that reaches past `end` (the file offset where the superblock
  // says the file's data end).
  void check(const std::string& path, uint64_t end);

 private:
  struct Extent {
    uint64_t at = 0, end = 0;
    Kind kind = Kind::object_header;
    uint32_t owner = 0;
  };
  std::string describe(const Extent& e) const;

  std::vector<Extent> extents_;
  std::vector<std::string> owners_;
};

}  // namespace mrmf::data
