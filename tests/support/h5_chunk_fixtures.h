// Fixtures of the tests of HDF5 chunk layouts read without HDF5
// (test_h5_chunks.cpp, test_h5_split_chunks.cpp): a small uint16 dataset
// written through the HDF5 C API in any chunk layout and filter pipeline,
// and the stored bytes of its chunks.
#pragma once

#include <hdf5.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "data/h5file.h"
#include "data/packed_chunks.h"
#include "support/format_fixtures.h"
#include "support/temp_dir.h"

namespace mrmf::test::h5chunks {

using data::PackedUnit;
using data::PackedUnits;
using data::StoredChunk;
using formats::iota;

// A folder of the tests' files, removed with it.
struct TempDir : test::TempDir {
  TempDir() : test::TempDir("mrmf_h5c") {}
};

// A [rows, 3, 4, 2] uint16 dataset "d" (iota values) through the HDF5 C API,
// with chunks of `chunk` (empty: contiguous), the shuffle filter where
// `shuffle`, gzip level `deflate` and Fletcher32 checksums where `fletcher`,
// written in the row ranges [lo, hi) given, in that order, each flushed to
// the file before the next: their chunks are allocated in that order.
inline void write_u16_rows(const std::string& path, hsize_t rows, const std::vector<hsize_t>& chunk, unsigned deflate,
                           const std::vector<std::pair<hsize_t, hsize_t>>& ranges, bool shuffle = false,
                           bool fletcher = false, hid_t file_type = H5T_STD_U16LE, bool extendible = false) {
  const Tensor t = iota({static_cast<int64_t>(rows), 3, 4, 2}, DType::U16, 61.f);  // both bytes of each value used
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hsize_t dims[4] = {rows, 3, 4, 2};
  const hsize_t unlimited[4] = {H5S_UNLIMITED, H5S_UNLIMITED, H5S_UNLIMITED, H5S_UNLIMITED};
  const hid_t space = H5Screate_simple(4, dims, extendible ? unlimited : nullptr);  // extendible: chunks may pass dims
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunk.empty()) REQUIRE(H5Pset_chunk(dcpl, 4, chunk.data()) >= 0);
  if (shuffle) REQUIRE(H5Pset_shuffle(dcpl) >= 0);
  if (deflate > 0) REQUIRE(H5Pset_deflate(dcpl, deflate) >= 0);
  if (fletcher) REQUIRE(H5Pset_fletcher32(dcpl) >= 0);
  const hid_t d = H5Dcreate2(f, "d", file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(d >= 0);
  for (const auto& [lo, hi] : ranges) {
    const hsize_t start[4] = {lo, 0, 0, 0}, count[4] = {hi - lo, 3, 4, 2};
    REQUIRE(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0);
    const hid_t mem = H5Screate_simple(4, count, nullptr);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_UINT16, mem, space, H5P_DEFAULT, t.data<uint16_t>() + lo * 24) >= 0);
    H5Sclose(mem);
    REQUIRE(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

// The stored bytes of `unit` in `path`.
inline std::vector<char> stored_bytes(const std::string& path, const PackedUnit& unit) {
  std::vector<char> b(static_cast<size_t>(unit.bytes));
  std::ifstream in(path, std::ios::binary);
  in.seekg(unit.offset);
  in.read(b.data(), unit.bytes);
  REQUIRE(in);
  return b;
}
// The stored bytes of every unit of `p` in `path`, in order.
inline std::vector<std::vector<char>> stored_units(const std::string& path, const PackedUnits& p) {
  std::vector<std::vector<char>> stored;
  for (const PackedUnit& u : p.units) stored.push_back(stored_bytes(path, u));
  return stored;
}
// Chunk i of `p` for decode_unit, its stored bytes read into stored[i].
inline StoredChunk stored_chunk(const PackedUnits& p, const std::vector<std::vector<char>>& stored, size_t i) {
  return StoredChunk{stored[i].data(), p.units[i].bytes, p.units[i].skipped};
}

}  // namespace mrmf::test::h5chunks
