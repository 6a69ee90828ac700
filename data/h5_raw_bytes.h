// The bytes of an HDF5 file, read without libhdf5: for the checks that walk
// metadata libhdf5 1.10 trusts without checking (h5_global_heap_check.h,
// h5_symbol_table_check.h), so that a damaged file is an error naming it
// instead of a crash or a hang inside the library.
#pragma once

#include <cstdint>
#include <string>

namespace mrmf::data {

// An unsigned little-endian integer of `bytes` bytes (HDF5 stores all its
// metadata numbers little-endian).
inline uint64_t little_endian(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A read-only descriptor on a file, with positioned reads. Move-only.
class RawFileBytes {
 public:
  // Throws a Data error starting with `where` when the file cannot be opened.
  RawFileBytes(const std::string& path, const std::string& where);
  ~RawFileBytes();
  RawFileBytes(RawFileBytes&& other) noexcept;
  RawFileBytes& operator=(RawFileBytes&&) = delete;
  RawFileBytes(const RawFileBytes&) = delete;
  RawFileBytes& operator=(const RawFileBytes&) = delete;

  uint64_t size() const { return size_; }
  // Whether [offset, offset + n) lies inside the file (no overflow).
  bool holds(uint64_t offset, uint64_t n) const { return offset <= size_ && n <= size_ - offset; }
  // Reads `n` bytes at `offset`; false when the file ends before them.
  bool read(uint64_t offset, void* out, uint64_t n) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace mrmf::data
