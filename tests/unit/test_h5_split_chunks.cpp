// Samples split over several HDF5 chunks, or sharing them, put together
// without HDF5 (decode_unit), and the layouts that keep the loaders on HDF5
// named with the h5repack command that fixes them (layout_advice). One
// chunk a sample: test_h5_chunks.cpp.
#include <hdf5.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/error.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/mapped_shard.h"
#include "data/packed_chunks.h"
#include "support/format_fixtures.h"
#include "support/h5_chunk_fixtures.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
using namespace mrmf::test::formats;
using namespace mrmf::test::h5chunks;
using Catch::Contains;

TEST_CASE("h5 formats: samples split over several chunks, compressed or not, put together without HDF5 (decode_unit)",
          "[data][h5]") {
  // Chunks that split a sample along any axis, partial ones at the far
  // edges (stored whole), one or two rows a sample, chunks holding the rows
  // of several whole samples (h5py's automatic chunks), unfiltered, gzip,
  // or shuffle and gzip: each sample's chunks, decoded where compressed and
  // placed, are the rows HDF5 reads.
  TempDir tmp;
  struct Split {
    std::vector<hsize_t> chunk;
    int64_t rows;  // per sample
    int64_t per_unit;
    int64_t total = 6;  // rows in the dataset
    bool extendible = false;
    int64_t units_per_chunk = 1;
  };
  for (const Split& c : std::vector<Split>{{{1, 2, 2, 1}, 1, 8},     // every axis, partial along the second
                                           {{1, 3, 4, 1}, 1, 2},     // the last axis (a channel a chunk)
                                           {{1, 1, 4, 2}, 2, 6},     // two rows a sample, one a chunk
                                           {{2, 2, 3, 2}, 2, 4},     // partial along two axes
                                           {{1, 3, 4, 2}, 2, 2},     // whole rows: a sample in two chunks
                                           {{2, 3, 4, 2}, 2, 1},     // a sample per chunk
                                           {{3, 3, 4, 2}, 4, 2, 4},  // LBANN-like, one sample: 3 rows + 1
                                           {{4, 2, 4, 2}, 4, 2, 4},
                                           {{1, 3, 8, 2}, 1, 1, 6, true},      // one chunk, larger than the sample
                                           {{8, 2, 4, 2}, 4, 2, 4, true},      // one sample, chunks of 8 rows
                                           {{2, 3, 4, 2}, 1, 1, 6, false, 2},  // two samples a chunk
                                           {{2, 3, 2, 2}, 1, 2, 6, false, 2},  // and split along axis 2
                                           {{2, 2, 4, 2}, 1, 2, 6, false, 2},  // or along axis 1, partial
                                           {{4, 2, 4, 1}, 1, 4, 6, false, 4},  // four, the last chunk partial
                                           {{4, 3, 4, 2}, 2, 1, 6, false, 2},  // two samples of two rows
                                           {{6, 3, 4, 2}, 2, 1, 6, false, 3},  // three in the one chunk
                                           {{8, 3, 4, 2}, 1, 1, 6, true, 8}})  // six in one past the rows
    for (const auto& [deflate, shuffle] : {std::pair<unsigned, bool>{6, false}, {6, true}, {0, false}}) {
      INFO("chunk " << c.chunk[0] << "x" << c.chunk[1] << "x" << c.chunk[2] << "x" << c.chunk[3] << ", rows " << c.rows
                    << ", deflate " << deflate << ", shuffle " << shuffle);
      const std::string path = tmp / "split.h5";
      const hsize_t total = static_cast<hsize_t>(c.total);
      write_u16_rows(path, total, c.chunk, deflate, {{0, total}}, shuffle, false, H5T_STD_U16LE, c.extendible);
      const H5File h = H5File::open_read(path);
      const PackedUnits p = h.packed_units("d", DType::U16, c.rows);
      REQUIRE(p.per_unit == c.per_unit);
      REQUIRE(p.units_per_chunk == c.units_per_chunk);
      // Listed once per run of samples that share them.
      const int64_t samples = c.total / c.rows, runs = (samples + c.units_per_chunk - 1) / c.units_per_chunk;
      REQUIRE(static_cast<int64_t>(p.units.size()) == runs * c.per_unit);
      CHECK(p.shuffle == shuffle);
      for (const PackedUnit& u : p.units) CHECK(u.skipped == (deflate ? 0u : kNoFilterApplied));
      const std::vector<int64_t> unit{c.rows, 3, 4, 2}, chunk(c.chunk.begin(), c.chunk.end());
      CHECK(p.unit_shape == (chunk == unit ? std::vector<int64_t>{} : unit));  // a grid unless the unit is its chunk
      const ChunkGrid g{p.unit_shape, p.chunk_shape, p.units_per_chunk};
      if (!g.unit.empty()) CHECK(g.chunks_per_unit() == c.per_unit);
      const std::vector<std::vector<char>> stored = stored_units(path, p);
      for (int64_t s = 0; s < c.total / c.rows; ++s) {
        const Tensor want = h.read_rows("d", s * c.rows, c.rows);
        std::vector<char> got(want.nbytes(), 0x7f);
        const size_t first = static_cast<size_t>(s / c.units_per_chunk * c.per_unit);
        if (g.unit.empty()) {
          decode_chunk(stored[first].data(), p.units[first].bytes, p.units[first].skipped, shuffle, 2, got.data(),
                       static_cast<int64_t>(got.size()), "unit");
        } else {
          decode_unit(
              g, [&](int64_t k) { return stored_chunk(p, stored, first + static_cast<size_t>(k)); }, shuffle, 2,
              got.data(), static_cast<int64_t>(got.size()), "f.h5: sample", s % g.units_per_chunk * c.rows);
        }
        REQUIRE(std::memcmp(got.data(), want.raw_data(), got.size()) == 0);
      }
      if (c.rows == 1 && c.chunk[0] == 1)
        CHECK(h.packed_units("d", DType::U16, 2).units.size() == p.units.size());  // 2-row samples
      CHECK(h.packed_units("d", DType::I16, c.rows).units.empty());                // another type
    }
  // A unit whose rows would start past its chunk's, or before it: refused
  // before any read.
  for (int64_t first : {2, -1}) {
    std::vector<char> out(48);
    CHECK_THROWS_WITH(decode_unit(
                          ChunkGrid{{1, 3, 4, 2}, {2, 3, 4, 2}, 2},
                          [](int64_t) -> StoredChunk { throw std::logic_error("no chunk may be read"); }, false, 2,
                          out.data(), 48, "s", first),
                      Contains("rows from " + std::to_string(first) + " of a unit of 1 rows outside a chunk of 2"));
  }
  // Compressed chunks of whole samples past max_shared_chunk_bytes (each
  // read inflates the whole chunk): refused; unfiltered ones are read where
  // they lie, whatever their size.
  {
    const std::string gz = tmp / "shared_gz.h5", plain = tmp / "shared_plain.h5";
    write_u16_rows(gz, 6, {2, 3, 2, 2}, 6, {{0, 6}});  // chunks of 24 elements: 48 bytes
    write_u16_rows(plain, 6, {2, 3, 2, 2}, 0, {{0, 6}});
    CHECK(H5File::open_read(gz).packed_units("d", DType::U16, 1, 48).units.size() == 6);  // 3 runs of 2 chunks
    CHECK(H5File::open_read(gz).packed_units("d", DType::U16, 1, 47).units.empty());
    CHECK(H5File::open_read(plain).packed_units("d", DType::U16, 1, 47).units.size() == 6);
  }
  // Partial edge chunks stored unfiltered (HDF5's layout option, which the
  // chunks' filter masks do not show): left to HDF5.
  {
    const std::string path = tmp / "dont_filter_partial.h5";
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[4] = {6, 3, 4, 2}, chunk[4] = {1, 2, 3, 2};
    const hid_t space = H5Screate_simple(4, dims, nullptr), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(H5Pset_chunk(dcpl, 4, chunk) >= 0);
    REQUIRE(H5Pset_deflate(dcpl, 6) >= 0);
    REQUIRE(H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) >= 0);
    const hid_t d = H5Dcreate2(f, "d", H5T_STD_U16LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    const Tensor t = iota({6, 3, 4, 2}, DType::U16, 61.f);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data<uint16_t>()) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
    CHECK(H5File::open_read(path).packed_units("d", DType::U16, 1).units.empty());
    const Tensor back = H5File::open_read(path).read("d");  // HDF5 reads it
    CHECK(std::memcmp(back.raw_data(), t.raw_data(), t.nbytes()) == 0);
  }
  // A chunk of rows of two samples but not of whole ones (3 rows a chunk,
  // 2 a sample), or more chunks a sample than decoded here, stays on HDF5.
  const std::string three = tmp / "three.h5";
  write_u16_rows(three, 6, {3, 3, 4, 2}, 6, {{0, 6}});
  CHECK(H5File::open_read(three).packed_units("d", DType::U16, 2).units.empty());
  CHECK(H5File::open_read(three).packed_units("d", DType::U16, 3).units.size() == 2);
  // A corrupt chunk of a split sample: a Data error naming the sample and
  // which of its chunks.
  const std::string split = tmp / "corrupt.h5";
  write_u16_rows(split, 6, {1, 2, 2, 1}, 6, {{0, 6}});
  const PackedUnits p = H5File::open_read(split).packed_units("d", DType::U16, 1);
  REQUIRE(p.per_unit == 8);
  std::vector<std::vector<char>> stored = stored_units(split, p);
  for (size_t b = 2; b < stored[3].size(); b += 3) stored[3][b] = static_cast<char>(stored[3][b] ^ 0x5a);
  std::vector<char> out(48);
  CHECK_THAT(data_error([&] {
               decode_unit(
                   {p.unit_shape, p.chunk_shape},
                   [&](int64_t k) { return stored_chunk(p, stored, static_cast<size_t>(k)); }, false, 2, out.data(), 48,
                   "f.h5: sample 0");
             }),
             Contains("f.h5: sample 0 (chunk 4 of 8)") && Contains("corrupt"));
  // An unfiltered chunk shorter than it should be (read where it lies):
  // a Data error, nothing read past it.
  {
    const std::string plain = tmp / "plain_split.h5";
    write_u16_rows(plain, 6, {1, 2, 2, 1}, 0, {{0, 6}});
    const PackedUnits q = H5File::open_read(plain).packed_units("d", DType::U16, 1);
    REQUIRE(q.per_unit == 8);
    const std::vector<std::vector<char>> raw = stored_units(plain, q);
    CHECK_THAT(data_error([&] {
                 decode_unit(
                     {q.unit_shape, q.chunk_shape},
                     [&](int64_t k) {
                       StoredChunk c = stored_chunk(q, raw, static_cast<size_t>(k));
                       if (k == 2) c.bytes -= 2;
                       return c;
                     },
                     false, 2, out.data(), 48, "f.h5: sample 0");
               }),
               Contains("f.h5: sample 0 (chunk 3 of 8): its chunk is stored unfiltered in 6 bytes, expected 8"));
  }
  // A split sample's chunks with filters skipped, their masks saying so
  // (written through H5Dwrite_chunk): mask 3 stored raw (read where it
  // lies), 2 shuffled only, 1 deflated only -- each read as HDF5 reads it.
  {
    const std::string path = tmp / "masks.h5";
    write_u16_rows(path, 6, {1, 2, 2, 1}, 6, {{0, 6}}, true);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "d", H5P_DEFAULT);
    for (uint32_t k = 1; k <= 3; ++k) {  // sample 0's chunks 1-3 (whole ones): 2 x 2 elements each
      const uint32_t mask = 4 - k;
      uint16_t vals[4];
      for (uint16_t i = 0; i < 4; ++i) vals[i] = static_cast<uint16_t>(1000 * k + 257 * i);  // both bytes used
      std::vector<char> bytes(reinterpret_cast<const char*>(vals), reinterpret_cast<const char*>(vals) + 8);
      if (!(mask & 1u)) {  // shuffled: the low bytes, then the high ones
        std::vector<char> s(8);
        for (size_t i = 0; i < 4; ++i)
          for (size_t j = 0; j < 2; ++j) s[j * 4 + i] = bytes[i * 2 + j];
        bytes = s;
      }
      if (!(mask & 2u)) {  // deflated
        std::vector<char> z(compressBound(bytes.size()));
        uLongf zbytes = z.size();
        // Level 0 (stored blocks): a size other than the chunk's before.
        // HDF5 1.10 keeps the old filter mask of a chunk rewritten at its old
        // size (the index entry is not updated).
        REQUIRE(compress2(reinterpret_cast<Bytef*>(z.data()), &zbytes, reinterpret_cast<const Bytef*>(bytes.data()),
                          bytes.size(), 0) == Z_OK);
        z.resize(zbytes);
        bytes = z;
      }
      const hsize_t at[4] = {0, 0, k / 2 * 2, k % 2};
      REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, mask, at, bytes.size(), bytes.data()) >= 0);
    }
    H5Dclose(d);
    H5Fclose(f);
    const H5File h = H5File::open_read(path);
    const PackedUnits q = h.packed_units("d", DType::U16, 1);
    REQUIRE(q.per_unit == 8);
    CHECK((q.units[1].skipped == 3u && q.units[2].skipped == 2u && q.units[3].skipped == 1u));
    const std::vector<std::vector<char>> stored = stored_units(path, q);
    const Tensor want = h.read_rows("d", 0, 1);
    REQUIRE(want.data<uint16_t>()[1] == 1000);  // element (0, 0, 0, 1): chunk 1's first, as put there
    std::vector<char> got(48);
    decode_unit(
        {q.unit_shape, q.chunk_shape}, [&](int64_t k) { return stored_chunk(q, stored, static_cast<size_t>(k)); }, true,
        2, got.data(), 48, "f.h5: sample 0");
    CHECK(std::memcmp(got.data(), want.raw_data(), 48) == 0);
  }
}

TEST_CASE("h5 formats: chunks or filters that keep the loaders on HDF5 are named, with the h5repack fix",
          "[data][h5]") {
  // layout_advice(): why a file's samples can be neither read in place nor
  // decoded by the loader's threads when its storage is the reason, and the
  // command that rewrites it.
  TempDir tmp;
  const bool have_h5repack = std::system("command -v h5repack > /dev/null 2>&1") == 0;
  if (!have_h5repack)
    WARN("h5repack (hdf5-tools, scripts/install_deps.sh) not found: the advice's commands are not run");
  struct Case {
    std::string name;
    std::vector<hsize_t> chunk;
    unsigned deflate;
    bool fletcher;
    int64_t rows_per_sample;
    std::vector<std::string> says;  // empty: no advice
  };
  const std::vector<Case> cases = {
      {"contig", {}, 0, false, 1, {}},
      {"whole", {1, 3, 4, 2}, 0, false, 1, {}},         // a sample per chunk: mapped
      {"whole_gz", {1, 3, 4, 2}, 6, false, 1, {}},      // decoded
      {"rows2", {2, 3, 4, 2}, 0, false, 1, {}},         // unfiltered, two samples a chunk: mapped
      {"split_gz", {1, 2, 2, 1}, 6, false, 1, {}},      // 8 chunks a sample: decoded
      {"two_rows_gz", {1, 3, 4, 2}, 6, false, 2, {}},   // 2 chunks a sample: decoded
      {"split", {1, 3, 2, 2}, 0, false, 1, {}},         // unfiltered, 2 chunks a sample: put together
      {"split_shared", {2, 3, 2, 2}, 0, false, 1, {}},  // unfiltered chunks that split samples and hold several
      {"two_gz", {2, 3, 4, 2}, 6, false, 1, {}},        // two whole samples a chunk: decoded a chunk per sample
      {"two_rows_in_3",
       {3, 3, 4, 2},
       6,
       false,
       2,
       {"(compressed)", "a chunk holds rows of several samples (3 rows a chunk, 2 a sample)",
        "-l d:CHUNK=2x3x4x2 IN.h5", "the threads making a batch on the host decode its samples."}},
      {"three_rows_in_2",  // unfiltered chunks of 2 rows, samples of 3, split along axis 2
       {2, 3, 2, 2},
       0,
       false,
       3,
       {"in chunks of 2x3x2x2:", "a chunk holds rows of several samples (2 rows a chunk, 3 a sample).", "-l d:CONTI",
        "read its samples in place."}},
      {"fletcher",
       {1, 3, 4, 2},
       6,
       true,
       1,
       {"(filtered)", "its filters (deflate, fletcher32) are decoded by HDF5 alone",
        "-l d:CHUNK=1x3x4x2 -f d:GZIP=4 IN.h5", "(its filters replaced by gzip)"}},
      {"both",  // h5py's automatic chunks split samples and hold several; and another filter
       {2, 3, 2, 2},
       6,
       true,
       1,
       {"in chunks of 2x3x2x2 (filtered): a chunk holds the rows of 2 samples, all of which HDF5 decodes to read "
        "one; its filters (deflate, fletcher32) are decoded by HDF5 alone.",
        "-l d:CHUNK=1x3x4x2 -f d:GZIP=4 IN.h5"}},
      {"both_rows",  // chunks holding parts of two samples; and another filter
       {3, 3, 4, 2},
       6,
       true,
       2,
       {"a chunk holds rows of several samples (3 rows a chunk, 2 a sample), all of which HDF5 decodes to read one; "
        "its filters (deflate, fletcher32) are decoded by HDF5 alone",
        "-l d:CHUNK=2x3x4x2 -f d:GZIP=4 IN.h5"}},
  };
  // The advice's own command, run: the rewritten file is read by the
  // loaders' own paths (decoded a sample per chunk where compressed), with
  // HDF5's rows.
  const auto check_fix = [&](const std::string& path, const std::string& advice, int64_t rows_per_sample,
                             bool compressed) {
    const size_t at = advice.find("`h5repack "), end = advice.find('`', at + 1);
    REQUIRE((at != std::string::npos && end != std::string::npos));
    std::string cmd = advice.substr(at + 1, end - at - 1);
    const size_t in = cmd.find(" IN.h5 OUT.h5");
    REQUIRE(in != std::string::npos);
    const std::string out = path.substr(0, path.size() - 3) + "_fixed.h5";
    cmd.replace(in, 13, " '" + path + "' '" + out + "'");
    INFO(cmd);
    if (!have_h5repack) return;
    REQUIRE(std::system(cmd.c_str()) == 0);
    const H5File h = H5File::open_read(path), fixed = H5File::open_read(out);
    CHECK(data::detail::layout_advice(fixed, "d", DType::U16, rows_per_sample).empty());
    const bool in_place = !fixed.unit_offsets("d", DType::U16, rows_per_sample).empty();
    const PackedUnits packed = fixed.packed_units("d", DType::U16, rows_per_sample);
    CHECK((in_place || !packed.units.empty()));
    CHECK(packed.units.empty() == !compressed);
    if (compressed) CHECK(packed.per_unit == 1);
    const Tensor a = h.read("d"), b = fixed.read("d");
    CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string path = tmp / (c.name + ".h5");
    write_u16_rows(path, 6, c.chunk, c.deflate, {{0, 6}}, false, c.fletcher);
    const H5File h = H5File::open_read(path);
    const H5File::Storage st = h.storage("d");
    CHECK(st.chunk == std::vector<int64_t>(c.chunk.begin(), c.chunk.end()));
    CHECK(st.filters.size() == (c.deflate ? 1u : 0u) + (c.fletcher ? 1u : 0u));
    if (c.deflate) CHECK((st.filters[0].id == H5Z_FILTER_DEFLATE && st.filters[0].name == "deflate"));
    const std::string advice = data::detail::layout_advice(h, "d", DType::U16, c.rows_per_sample);
    if (c.says.empty()) {
      CHECK(advice.empty());
      continue;
    }
    CHECK_THAT(advice, Contains(path + ": 'd' is stored"));
    for (const std::string& s : c.says) CHECK_THAT(advice, Contains(s));
    check_fix(path, advice, c.rows_per_sample, c.deflate > 0);
  }
  // Samples in many chunks, each sample's decoded from the file's bytes
  // equal to HDF5's rows: 75 chunks a sample (more than the 64 the loaders
  // took before they counted what locating chunks costs), compressed or
  // not; h5py's automatic chunks for a large file of CosmoFlow cubes
  // (rows of two samples a chunk, 216 chunks a sample).
  const auto decodes_as_hdf5 = [](const std::string& path, int64_t per_unit, int64_t units_per_chunk) {
    const H5File h = H5File::open_read(path);
    const PackedUnits p = h.packed_units("d", DType::U16, 1);
    REQUIRE(p.per_unit == per_unit);
    REQUIRE(p.units_per_chunk == units_per_chunk);
    const int64_t samples = h.shape("d")[0];
    REQUIRE(static_cast<int64_t>(p.units.size()) == samples / units_per_chunk * per_unit);
    CHECK(data::detail::layout_advice(h, "d", DType::U16, 1).empty());
    const std::vector<std::vector<char>> stored = stored_units(path, p);
    const ChunkGrid g{p.unit_shape, p.chunk_shape, p.units_per_chunk};
    for (int64_t s = 0; s < samples; ++s) {
      const Tensor want = h.read_rows("d", s, 1);
      std::vector<char> got(want.nbytes(), 0x7f);
      const size_t first = static_cast<size_t>(s / units_per_chunk * per_unit);
      decode_unit(
          g, [&](int64_t k) { return stored_chunk(p, stored, first + static_cast<size_t>(k)); }, p.shuffle, 2,
          got.data(), static_cast<int64_t>(got.size()), "sample", s % units_per_chunk);
      REQUIRE(std::memcmp(got.data(), want.raw_data(), got.size()) == 0);
    }
  };
  for (int level : {1, 0}) {
    INFO("deflate " << level);
    const std::string path = tmp / ("many" + std::to_string(level) + ".h5");
    H5File f = H5File::create(path);
    f.write("d", iota({2, 5, 5, 3, 1}, DType::U16, 3.f), WriteOptions{0, level, false, {1, 1, 1, 1, 1}});
    f.close();
    decodes_as_hdf5(path, 75, 1);
  }
  {
    const std::string path = tmp / "auto.h5";
    H5File f = H5File::create(path);
    f.write("d", iota({4, 6, 6, 6, 1}, DType::U16, 3.f), WriteOptions{0, 4, false, {2, 1, 1, 1, 1}});
    f.close();
    decodes_as_hdf5(path, 216, 2);
  }
  // Too many chunks to locate: 4608 of 2 bytes, where HDF5 1.10's lookups
  // (~0.17 s) would cost more than its read of the file; compressed or not,
  // a sample in its own chunks or two samples sharing them. Said, with
  // the h5repack command.
  for (const auto& [level, shared] : {std::pair<int, bool>{1, false}, {0, false}, {1, true}}) {
    INFO("deflate " << level << ", shared " << shared);
    const std::string path = tmp / ("tiny" + std::to_string(level) + std::to_string(shared) + ".h5");
    H5File f = H5File::create(path);
    const int64_t n = shared ? 4 : 2, side = shared ? 34 : 48;  // shared: 4 / 2 x 34 x 68 = 4624 chunks
    f.write("d", iota({n, side, shared ? 68 : 48, 1, 1}, DType::U16, 3.f),
            WriteOptions{0, level, false, {shared ? 2 : 1, 1, 1, 1, 1}});
    f.close();
    const H5File h = H5File::open_read(path);
    CHECK(h.packed_units("d", DType::U16, 1).units.empty());
    const std::string advice = data::detail::layout_advice(h, "d", DType::U16, 1);
    const std::string chunks = shared ? "its 4624 chunks (2312 a sample)" : "its 4608 chunks (2304 a sample)";
    CHECK_THAT(advice, Contains(chunks + " are more than the loader locates itself: HDF5 1.10 takes time "
                                         "proportional to their number to find each, ~0.1") &&
                           Contains(" s for all, more than a read of the file through HDF5") &&
                           Contains(level ? "-l d:CHUNK=1x" : "-l d:CONTI IN.h5"));
    if (shared) CHECK_THAT(advice, Contains("a chunk holds the rows of 2 samples, all of which HDF5 decodes"));
    check_fix(path, advice, 1, level > 0);
  }
  // Many small samples a chunk each (4200 of 4 bytes): too many chunks to
  // locate, compressed or not; a chunk per sample would be as many, so the
  // advice is contiguous (read in place), not the layout the file has.
  for (int level : {1, 0}) {
    INFO("deflate " << level);
    const std::string path = tmp / ("small" + std::to_string(level) + ".h5");
    H5File f = H5File::create(path);
    f.write("d", iota({4200, 2}, DType::U16, 3.f), WriteOptions{1, level});
    f.close();
    const H5File h = H5File::open_read(path);
    CHECK(h.unit_offsets("d", DType::U16, 1).empty());  // unfiltered: not located either (~0.14 s)
    CHECK(h.packed_units("d", DType::U16, 1).units.empty());
    const std::string advice = data::detail::layout_advice(h, "d", DType::U16, 1);
    CHECK_THAT(advice, Contains("its 4200 chunks (1 a sample) are more than the loader locates itself") &&
                           Contains("`h5repack -l d:CONTI IN.h5 OUT.h5`") && !Contains("CHUNK="));
    if (level) CHECK_THAT(advice, Contains("read its samples in place, uncompressed (in a chunk each, they would be"));
    check_fix(path, advice, 1, false);
  }
  // Not what rewriting the chunks would change: a chunk never written;
  // another byte order (h5repack keeps it), or another type; a row count
  // that is not a multiple of the sample's.
  const std::string hole = tmp / "hole.h5", be = tmp / "be.h5";
  write_u16_rows(hole, 6, {1, 3, 4, 2}, 6, {{0, 4}, {5, 6}});
  CHECK(H5File::open_read(hole).packed_units("d", DType::U16, 1).units.empty());
  CHECK(data::detail::layout_advice(H5File::open_read(hole), "d", DType::U16, 1).empty());
  write_u16_rows(be, 6, {2, 3, 2, 2}, 6, {{0, 6}}, false, false, H5T_STD_U16BE);
  CHECK(data::detail::layout_advice(H5File::open_read(be), "d", DType::U16, 1).empty());
  const std::string two = tmp / "two_rows_in_3.h5";  // advised above as uint16 in samples of 2 rows
  CHECK(data::detail::layout_advice(H5File::open_read(two), "d", DType::I16, 2).empty());
  CHECK(data::detail::layout_advice(H5File::open_read(two), "d", DType::U16, 4).empty());
}
