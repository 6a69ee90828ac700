// A whole file mapped read-only into memory (RAII, move-only).
//
// Why: the CosmoFlow loaders can read a contiguous, unfiltered dataset (the
// authors' `3Dmap`, LBANN's `full`) straight from the page cache
// (data/loader_sources.cpp). Through HDF5 every sample is first copied into
// a staging buffer by the one I/O thread, then converted; from a mapping
// the sample is converted where it lies, by any thread that takes a chunk
// of the batch (data/chunked_work.h), as for a preloaded Neuron Inverter
// shard.
//
// A mapping must not outlive a file that shrinks under it (reading past the
// new end is a SIGBUS): users check the size they need against size() when
// they map, and training files are not rewritten while they are read.
#pragma once

#include <cstdint>
#include <string>

namespace mrmf::data {

class MappedFile {
 public:
  // Maps all of `path` read-only; a Data error naming the file if it cannot
  // be opened or mapped.
  static MappedFile map(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { reset(); }

  const char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void reset() noexcept;  // unmaps (a failure is logged, never thrown)

  const char* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace mrmf::data
