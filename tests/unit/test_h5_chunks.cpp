// How samples lie in HDF5 files, and reading them without HDF5: each sample's
// offset in contiguous or chunked datasets (unit_offsets), gzip (and shuffle)
// chunks decoded with libdeflate (packed_units, decode_chunk), and how chunks
// meet samples along axis 0 (chunk_rows). Samples split over several chunks
// and the layout advice: test_h5_split_chunks.cpp.
#include <hdf5.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <utility>

#include "core/error.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "data/packed_chunks.h"
#include "support/format_fixtures.h"
#include "support/h5_chunk_fixtures.h"
#include "support/temp_dir.h"

using namespace mrmf;
using namespace mrmf::data;
using namespace mrmf::test::formats;
using namespace mrmf::test::h5chunks;
using Catch::Contains;

namespace {

// Whether the file's bytes at each of `offsets` are units of `per` rows of
// "d" as HDF5 reads them (one offset per unit, all of them).
bool units_at(const std::string& path, const std::vector<int64_t>& offsets, int64_t per) {
  const H5File h = H5File::open_read(path);
  const int64_t rows = h.shape("d")[0], unit = per * 24 * 2;
  if (static_cast<int64_t>(offsets.size()) * per != rows) return false;
  std::ifstream in(path, std::ios::binary);
  for (size_t u = 0; u < offsets.size(); ++u) {
    const Tensor want = h.read_rows("d", static_cast<int64_t>(u) * per, per);
    std::vector<char> got(static_cast<size_t>(unit));
    in.seekg(offsets[u]);
    in.read(got.data(), unit);
    if (!in || std::memcmp(got.data(), want.raw_data(), got.size()) != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("h5 formats: where each sample lies in the file, contiguous or chunked (unit_offsets)", "[data][h5]") {
  // The offsets are checked against the file's own bytes: at each, a unit
  // of rows as HDF5 reads it.
  TempDir tmp;
  const std::string contig = tmp / "contig.h5";
  write_u16_rows(contig, 6, {}, 0, {{0, 6}});
  for (int64_t per : {1, 2, 3, 6}) {
    INFO("contiguous, rows per unit " << per);
    const auto off = H5File::open_read(contig).unit_offsets("d", DType::U16, per);
    REQUIRE(!off.empty());
    CHECK(units_at(contig, off, per));
    CHECK(off[0] == H5File::open_read(contig).contiguous_offset("d", DType::U16));
  }
  CHECK(H5File::open_read(contig).unit_offsets("d", DType::U16, 4).empty());  // 6 rows: no whole units of 4
  CHECK(H5File::open_read(contig).unit_offsets("d", DType::I16, 1).empty());  // another type

  // Chunks spanning a row's other axes, one to three rows each, chunk 1 (or
  // the last) allocated first: every unit inside one chunk maps; a unit
  // across two chunks maps only where they lie back to back.
  for (hsize_t k : {1, 2, 3}) {
    const std::string path = tmp / ("rows" + std::to_string(k) + ".h5");
    write_u16_rows(path, 6, {k, 3, 4, 2}, 0, {{k, 6}, {0, k}});
    const H5File h = H5File::open_read(path);
    CHECK(h.contiguous_offset("d", DType::U16) == -1);
    for (int64_t per : {int64_t{1}, static_cast<int64_t>(k)}) {
      INFO(k << " rows per chunk, rows per unit " << per);
      CHECK(units_at(path, h.unit_offsets("d", DType::U16, per), per));
    }
  }
  // One-row chunks allocated in row order lie back to back: units of 2, 3
  // and 6 rows across them are each one run.
  const std::string in_order = tmp / "in_order.h5";
  write_u16_rows(in_order, 6, {1, 3, 4, 2}, 0, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}});
  for (int64_t per : {2, 3, 6}) {
    INFO("chunks in row order, rows per unit " << per);
    const auto off = H5File::open_read(in_order).unit_offsets("d", DType::U16, per);
    REQUIRE(!off.empty());
    CHECK(units_at(in_order, off, per));
  }
  // Rows 2 and 3 of 3-row chunks: row 3 begins chunk 1, allocated before
  // chunk 0, so the unit is not one run.
  CHECK(H5File::open_read(tmp / "rows3.h5").unit_offsets("d", DType::U16, 2).empty());
  // As chunks (packed_units): not those units either (a chunk holds rows of
  // two), but units of a chunk each.
  CHECK(H5File::open_read(tmp / "rows3.h5").packed_units("d", DType::U16, 2).units.empty());
  CHECK(H5File::open_read(tmp / "rows3.h5").packed_units("d", DType::U16, 3).units.size() == 2);
  // Not mappable: chunks smaller than a row, compressed chunks, a chunk
  // never written (its rows read as the fill value).
  const std::string part = tmp / "part_row.h5", gz = tmp / "gzip.h5", hole = tmp / "hole.h5";
  write_u16_rows(part, 6, {1, 3, 2, 2}, 0, {{0, 6}});
  write_u16_rows(gz, 6, {1, 3, 4, 2}, 4, {{0, 6}});
  write_u16_rows(hole, 6, {1, 3, 4, 2}, 0, {{0, 4}, {5, 6}});
  for (const std::string& path : {part, gz, hole}) {
    INFO(path);
    CHECK(H5File::open_read(path).unit_offsets("d", DType::U16, 1).empty());
    CHECK(H5File::open_read(path).read("d").numel() == 6 * 24);  // HDF5 still reads it
  }
}

TEST_CASE("h5 formats: gzip-compressed chunks decoded without HDF5 (packed_units, decode_chunk)", "[data][h5]") {
  // A unit per chunk, deflate alone or after shuffle, one chunk's filters
  // skipped (written raw through H5Dwrite_chunk): each unit's stored bytes,
  // decoded, are the rows HDF5 reads.
  TempDir tmp;
  for (bool shuffle : {false, true})
    for (hsize_t k : {1, 2}) {
      INFO("shuffle " << shuffle << ", rows per chunk " << k);
      const std::string path = tmp / ("gz" + std::to_string(shuffle) + std::to_string(k) + ".h5");
      write_u16_rows(path, 6, {k, 3, 4, 2}, 6, {{0, 6}}, shuffle);
      {
        // Chunks rewritten with filters skipped, their masks saying so:
        // chunk 1 unfiltered; with shuffle and one-row chunks also chunk 2
        // shuffled only (mask 2) and chunk 3 deflated only (mask 1).
        const Tensor rows = iota({6, 3, 4, 2}, DType::U16, 7.f);  // other values than the dataset's
        const auto raw = [&](hsize_t c) { return reinterpret_cast<const char*>(rows.data<uint16_t>() + c * k * 24); };
        const hsize_t bytes = k * 48;
        const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        const hid_t d = H5Dopen2(f, "d", H5P_DEFAULT);
        const auto put = [&](hsize_t c, uint32_t mask, const char* data, size_t n) {
          const hsize_t at[4] = {c * k, 0, 0, 0};
          REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, mask, at, n, data) >= 0);
        };
        put(1, shuffle ? 3u : 1u, raw(1), bytes);  // every filter of the pipeline skipped
        if (shuffle && k == 1) {                   // (chunks 2 and 3 of 6 rows: only where a chunk is one row)
          std::vector<char> shuffled(bytes), deflated(compressBound(bytes));
          for (hsize_t i = 0; i < bytes / 2; ++i)
            for (hsize_t j = 0; j < 2; ++j) shuffled[j * (bytes / 2) + i] = raw(2)[i * 2 + j];
          uLongf zbytes = deflated.size();
          REQUIRE(compress2(reinterpret_cast<Bytef*>(deflated.data()), &zbytes, reinterpret_cast<const Bytef*>(raw(3)),
                            bytes, 6) == Z_OK);
          put(2, 2u, shuffled.data(), bytes);
          put(3, 1u, deflated.data(), zbytes);
        }
        H5Dclose(d);
        H5Fclose(f);
        const Tensor back = H5File::open_read(path).read_rows("d", static_cast<int64_t>(k), static_cast<int64_t>(k));
        REQUIRE(std::memcmp(back.raw_data(), raw(1), bytes) == 0);  // HDF5 reads what was put there
      }
      const H5File h = H5File::open_read(path);
      const PackedUnits p = h.packed_units("d", DType::U16, static_cast<int64_t>(k));
      REQUIRE(p.units.size() == 6 / k);
      CHECK(p.shuffle == shuffle);
      CHECK(p.units[1].skipped == (shuffle ? 3u : 1u));
      CHECK(p.units[0].skipped == 0u);
      if (shuffle && k == 1) CHECK((p.units[2].skipped == 2u && p.units[3].skipped == 1u));
      for (size_t u = 0; u < p.units.size(); ++u) {
        const std::vector<char> in = stored_bytes(path, p.units[u]);
        const Tensor want = h.read_rows("d", static_cast<int64_t>(u * k), static_cast<int64_t>(k));
        std::vector<char> got(want.nbytes());
        decode_chunk(in.data(), p.units[u].bytes, p.units[u].skipped, p.shuffle, 2, got.data(),
                     static_cast<int64_t>(got.size()), "unit");
        REQUIRE(std::memcmp(got.data(), want.raw_data(), got.size()) == 0);
      }
      CHECK(h.unit_offsets("d", DType::U16, 1).empty());                    // compressed: not readable in place
      if (k == 2) {  // two units per chunk: the chunk listed once, for both
        const PackedUnits q = h.packed_units("d", DType::U16, 1);
        CHECK(q.units_per_chunk == 2);
        REQUIRE(q.units.size() == 3);
        for (size_t u = 0; u < 3; ++u)  // the chunk rewritten with its filters skipped too
          CHECK((q.units[u].offset == p.units[u].offset && q.units[u].bytes == p.units[u].bytes &&
                 q.units[u].skipped == p.units[u].skipped));
      }
      CHECK(h.packed_units("d", DType::I16, static_cast<int64_t>(k)).units.empty());  // another type
    }
  // Corrupt or truncated bytes: a Data error naming what was decoded.
  {
    const std::string path = tmp / "gz01.h5";
    const auto units = H5File::open_read(path).packed_units("d", DType::U16, 1).units;
    REQUIRE(units.size() == 6);
    const PackedUnit u = units[2];
    std::vector<char> in = stored_bytes(path, u), out(48);
    for (size_t b = 2; b < in.size(); b += 3) in[b] = static_cast<char>(in[b] ^ 0x5a);
    CHECK_THAT(data_error([&] { decode_chunk(in.data(), u.bytes, 0, false, 2, out.data(), 48, "f.h5: sample 2"); }),
               Contains("f.h5: sample 2") && Contains("corrupt"));
    const std::vector<char> good = stored_bytes(path, u);
    CHECK_THAT(data_error([&] { decode_chunk(good.data(), u.bytes - 4, 0, false, 2, out.data(), 48, "s"); }),
               Contains("does not decode"));
    CHECK_THAT(data_error([&] { decode_chunk(good.data(), u.bytes, 0, false, 2, out.data(), 40, "s"); }),
               Contains("40 bytes expected (it decodes to more)"));
    std::vector<char> wide(56);
    CHECK_THAT(data_error([&] { decode_chunk(good.data(), u.bytes, 0, false, 2, wide.data(), 56, "s"); }),
               Contains("56 bytes expected (it decodes to 48)"));
    // The stream intact but its Adler-32 (the last 4 bytes) not: refused.
    std::vector<char> bad_sum = good;
    bad_sum.back() = static_cast<char>(bad_sum.back() ^ 1);
    CHECK_THAT(data_error([&] { decode_chunk(bad_sum.data(), u.bytes, 0, false, 2, out.data(), 48, "s"); }),
               Contains("stream or checksum is invalid"));
    decode_chunk(good.data(), u.bytes, 0, false, 2, out.data(), 48, "s");  // (the same bytes with their sum: taken)
  }
  // Chunks of an unfiltered dataset are taken too, recorded as having
  // skipped every filter: decode_chunk() copies them as stored (and checks
  // their size).
  const std::string fl = tmp / "fletcher.h5", plain = tmp / "plain.h5", hole = tmp / "hole.h5";
  write_u16_rows(plain, 6, {1, 3, 4, 2}, 0, {{0, 6}});
  {
    const H5File h = H5File::open_read(plain);
    const PackedUnits p = h.packed_units("d", DType::U16, 1);
    REQUIRE(p.units.size() == 6);
    CHECK(!p.shuffle);
    for (size_t u = 0; u < p.units.size(); ++u) {
      CHECK(p.units[u].skipped == kNoFilterApplied);
      const std::vector<char> in = stored_bytes(plain, p.units[u]);
      const Tensor want = h.read_rows("d", static_cast<int64_t>(u), 1);
      std::vector<char> got(want.nbytes());
      decode_chunk(in.data(), p.units[u].bytes, p.units[u].skipped, false, 2, got.data(),
                   static_cast<int64_t>(got.size()), "unit");
      REQUIRE(std::memcmp(got.data(), want.raw_data(), got.size()) == 0);
    }
    CHECK_THAT(data_error([&] {
                 std::vector<char> in(48), out(50);
                 decode_chunk(in.data(), 48, kNoFilterApplied, false, 2, out.data(), 50, "f.h5: sample 1");
               }),
               Contains("f.h5: sample 1: its chunk is stored unfiltered in 48 bytes, expected 50"));
  }
  // Not decoded without HDF5: other filters in the pipeline, a chunk never
  // written. (Chunks smaller than a row are, each sample from its chunks:
  // the next test case.)
  write_u16_rows(fl, 6, {1, 3, 4, 2}, 6, {{0, 6}}, false, true);
  write_u16_rows(hole, 6, {1, 3, 4, 2}, 6, {{0, 4}, {5, 6}});
  for (const std::string& path : {fl, hole}) {
    INFO(path);
    CHECK(H5File::open_read(path).packed_units("d", DType::U16, 1).units.empty());
  }
}

TEST_CASE("h5 formats: how chunks meet samples along axis 0 (chunk_rows)", "[data][h5]") {
  using K = ChunkRows::Kind;
  const auto kind = [](int64_t rows, int64_t unit, int64_t chunk) {
    const ChunkRows c = chunk_rows(rows, unit, chunk);
    return std::pair<K, int64_t>(c.kind, c.units_per_chunk);
  };
  CHECK(kind(64, 1, 1) == std::pair(K::InUnit, int64_t{1}));      // a sample per chunk
  CHECK(kind(64, 4, 2) == std::pair(K::InUnit, int64_t{1}));      // a sample over two chunks
  CHECK(kind(4, 4, 3) == std::pair(K::InUnit, int64_t{1}));       // one sample: its edge chunk is its own
  CHECK(kind(4, 4, 8) == std::pair(K::InUnit, int64_t{1}));       // one sample in a chunk past it
  CHECK(kind(64, 4, 4) == std::pair(K::InUnit, int64_t{1}));      // a sample of 4 rows per chunk
  CHECK(kind(64, 1, 2) == std::pair(K::WholeUnits, int64_t{2}));  // h5py's automatic chunks
  CHECK(kind(64, 2, 8) == std::pair(K::WholeUnits, int64_t{4}));
  CHECK(kind(3, 1, 4) == std::pair(K::WholeUnits, int64_t{4}));     // a chunk past the dataset's rows
  CHECK(kind(64, 2, 3) == std::pair(K::PartsOfUnits, int64_t{1}));  // rows of two samples, neither whole
  CHECK(kind(64, 4, 6) == std::pair(K::PartsOfUnits, int64_t{1}));
}

TEST_CASE("h5 formats: which chunk counts are worth locating (chunks_worth_locating)", "[data][h5]") {
  // Up to 4096 chunks always; past that where n^2 x 8 ns <= n x bytes x
  // samples a chunk x 4 ns (compressed) or 0.5 ns (unfiltered): 2n <= bytes
  // x samples, or 16n <= bytes x samples. Each boundary from both sides.
  CHECK(chunks_worth_locating(4096, 1, 1, true));
  CHECK(chunks_worth_locating(4096, 1, 1, false));
  CHECK(chunks_worth_locating(4097, 8194, 1, true));
  CHECK_FALSE(chunks_worth_locating(4097, 8193, 1, true));
  CHECK(chunks_worth_locating(4097, 65552, 1, false));
  CHECK_FALSE(chunks_worth_locating(4097, 65551, 1, false));
  CHECK(chunks_worth_locating(4097, 4097, 2, true));  // a chunk of two samples: inflated by HDF5 for each
  CHECK_FALSE(chunks_worth_locating(4097, 4096, 2, true));
  // h5py's automatic chunks of 128 cubes of 128^3 (16384 chunks of 16
  // cubes, 128 KiB); 32768 chunks of 8 KiB of one sample each (10 s).
  CHECK(chunks_worth_locating(16384, 16 * 16 * 16 * 16 * 2, 16, true));
  CHECK_FALSE(chunks_worth_locating(32768, 8 << 10, 1, true));
  CHECK(chunk_lookup_seconds(16384) == Approx(2.147).epsilon(0.001));
}
