// The chunk-index check (data/h5_chunk_index_check.h): valid chunked files
// of the original format pass and read their values -- filters of every
// kind, chunks that split rows, B-trees of several levels, a chunk that
// legitimately skipped its filter, superblock version 1 with its own
// B-tree K -- and damage to the chunk B-tree, which libhdf5 1.10 follows
// without checking (a filter mask saying "unfiltered" made it copy past a
// chunk's stored bytes: session 61's fuzzing), is a Data error naming the
// file, the dataset and the structure. The same in HDF5 1.8's format
// (superblock 2, checksummed object headers, the same unchecksummed chunk
// B-tree), whose K values lie in the superblock extension; files in 1.10's
// format (chunk indexes of their own, checksummed) pass.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/h5_chunk_index_check.h"
#include "data/h5_symbol_table_check.h"
#include "data/h5file.h"
#include "support/damaged_read.h"
#include "support/file_bytes.h"
#include "support/temp_dir.h"

using namespace mrmf;
using mrmf::testing::file_bytes;
using mrmf::testing::le8;
using mrmf::testing::poke;
using mrmf::testing::read_le;

namespace {

constexpr size_t kTreeHeader = 24;

// Which format libhdf5 writes (H5Pset_libver_bounds): the original
// (superblock 0, or 1 with a K of its own), 1.8's (superblock 2, version-2
// object headers, new-style groups, layout version 3), or 1.10's
// (superblock 3, layout version 4: fixed and extensible arrays).
enum class Format { original, v18, v110 };
const char* format_name(Format f) { return f == Format::original ? "original" : f == Format::v18 ? "1.8" : "1.10"; }

struct Chunked {
  hsize_t rows = 8, cols = 64;
  std::vector<hsize_t> chunk = {1, 64};
  bool shuffle = false, deflate = true, fletcher32 = false;
  unsigned istore_k = 0;  // > 0: superblock version 1 with this K for chunk B-trees
  bool unlimited = false;  // maximum dimensions unlimited (chunks may be larger than the dataset)
  bool committed = false;  // the datatype a named one in the file (a shared message in the object header)
  Format format = Format::original;
};

float value(hsize_t i) { return 0.25f * static_cast<float>(i % 1000) - 3.0f; }

// A file with one chunked float32 dataset "x" (rows x cols) written as `c` says.
std::string make_chunked(const test::TempDir& dir, const std::string& name, const Chunked& c) {
  const std::string path = dir.file(name);
  const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (c.istore_k > 0) REQUIRE(H5Pset_istore_k(fcpl, c.istore_k) >= 0);
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (c.format != Format::original) {
    const H5F_libver_t v = c.format == Format::v18 ? H5F_LIBVER_V18 : H5F_LIBVER_V110;
    REQUIRE(H5Pset_libver_bounds(fapl, v, v) >= 0);
  }
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  H5Pclose(fapl);
  REQUIRE(f >= 0);
  const hsize_t dims[2] = {c.rows, c.cols}, unlimited[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
  const hid_t space = H5Screate_simple(2, dims, c.unlimited ? unlimited : nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  REQUIRE(H5Pset_chunk(dcpl, 2, c.chunk.data()) >= 0);
  if (c.shuffle) REQUIRE(H5Pset_shuffle(dcpl) >= 0);
  if (c.deflate) REQUIRE(H5Pset_deflate(dcpl, 1) >= 0);
  if (c.fletcher32) REQUIRE(H5Pset_fletcher32(dcpl) >= 0);
  const hid_t type = H5Tcopy(H5T_IEEE_F32LE);
  if (c.committed) REQUIRE(H5Tcommit2(f, "t", type, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) >= 0);
  const hid_t d = H5Dcreate2(f, "x", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Tclose(type);
  REQUIRE(d >= 0);
  std::vector<float> v(c.rows * c.cols);
  for (hsize_t i = 0; i < v.size(); ++i) v[i] = value(i);
  if (!v.empty()) REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
  H5Pclose(fcpl);
  const unsigned superblock = static_cast<unsigned char>(file_bytes(path)[8]);
  REQUIRE(superblock == (c.format == Format::original ? (c.istore_k > 0 ? 1 : 0) : c.format == Format::v18 ? 2 : 3));
  return path;
}

void require_reads_back(const std::string& path, const Chunked& c) {
  const Tensor x = data::H5File::open_read(path).read("x", DType::F32);
  REQUIRE(x.numel() == static_cast<int64_t>(c.rows * c.cols));
  const float* p = x.data<float>();
  for (hsize_t i = 0; i < c.rows * c.cols; ++i) REQUIRE(p[i] == value(i));
}

// The file offsets of the chunk B-tree's nodes (type 1), with their levels.
struct Node {
  size_t at = 0;
  int level = 0;
  uint64_t used = 0;
};
std::vector<Node> chunk_nodes(const std::string& bytes) {
  std::vector<Node> nodes;
  for (size_t t = bytes.find("TREE"); t != std::string::npos; t = bytes.find("TREE", t + 1))
    if (bytes[t + 4] == 1) nodes.push_back({t, static_cast<unsigned char>(bytes[t + 5]), read_le(bytes, t + 6, 2)});
  return nodes;
}
// A node's i-th child address, keys of a 2-D dataset's chunks being 8 + 8 x 3 bytes.
constexpr size_t kKey = 8 + 8 * 3;
size_t child_at(const Node& n, size_t i) { return n.at + kTreeHeader + kKey + i * (kKey + 8); }
size_t key_at(const Node& n, size_t i) { return n.at + kTreeHeader + i * (kKey + 8); }

// The file offset of a 2-D dataset's chunk dimensions in its layout
// message (version 3, chunked, 3 dimensions, the B-tree's address at `tree`).
size_t chunk_dims_at(const std::string& bytes, size_t tree) {
  const std::string head = std::string("\x03\x02\x03", 3) + le8(tree);
  const size_t at = bytes.find(head);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.find(head, at + 1) == std::string::npos);
  return at + head.size();
}

std::string le4(uint32_t v) { return le8(v).substr(0, 4); }

void require_damage_named(const std::string& path, const std::string& what) {
  testing::require_read_refused(path, "x",
                                {path + ": dataset 'x': its chunk index is damaged (", what, "is the file damaged?"});
}

void expect_stored_unfiltered(const std::string& path, const std::string& what) {
  testing::require_read_refused(
      path, "x", {path + ": dataset 'x': its chunk is stored unfiltered ", what, "the file may be corrupt"});
}

}  // namespace

TEST_CASE("chunk index check: valid chunked files of each format pass and read back", "[h5][data]") {
  test::TempDir dir;
  Chunked c;
  c.format = GENERATE(Format::original, Format::v18, Format::v110);
  INFO("format " << format_name(c.format));
  SECTION("deflate a row per chunk") {}
  SECTION("shuffle and deflate chunks that split rows") {
    c.shuffle = true;
    c.chunk = {2, 16};
  }
  SECTION("Fletcher-32 alone and edge chunks") {
    c.deflate = false;
    c.fletcher32 = true;
    c.rows = 9;
    c.cols = 60;
    c.chunk = {2, 16};
  }
  SECTION("no filter") { c.deflate = false; }
  SECTION("shuffle alone") {
    c.deflate = false;
    c.shuffle = true;
  }
  SECTION("a B-tree of several levels") {
    c.rows = 5000;
    c.cols = 8;
    c.chunk = {1, 8};
  }
  SECTION("a small K for chunk B-trees (superblock 1; in 1.8's format the superblock extension)") {
    c.rows = 300;
    c.cols = 8;
    c.chunk = {1, 8};
    c.istore_k = 2;
  }
  SECTION("chunks larger than the dataset under unlimited maximum dimensions") {
    c.rows = 3;
    c.cols = 10;
    c.chunk = {4, 16};
    c.unlimited = true;
  }
  SECTION("an empty dataset whose chunks are longer than its fixed size of 0") {
    c.rows = 0;
    c.chunk = {4, 64};
  }
  SECTION("a named datatype (the review: its element size was read from the reference)") { c.committed = true; }
  const std::string path = make_chunked(dir, "x.h5", c);
  const auto nodes = chunk_nodes(file_bytes(path));
  // 1.10's format indexes chunks otherwise (checksummed): not walked.
  REQUIRE(nodes.empty() == (c.rows == 0 || c.format == Format::v110));
  CHECK(data::check_symbol_table_structure(path).count("x") == (c.format == Format::v110 ? 0 : 1));
  if (c.rows >= 300 && c.format != Format::v110) {  // the walk goes down levels
    int top = 0;
    for (const Node& n : nodes) top = std::max(top, n.level);
    CHECK(top >= 2);
  }
  require_reads_back(path, c);
}

TEST_CASE("chunk index check: chunks longer than a fixed maximum made empty then extended read back", "[h5][data]") {
  // libhdf5 checks a chunk against a fixed maximum only along axes not
  // empty when the dataset is made (the review's file). Unfiltered: each
  // chunk's stored size says what it holds.
  test::TempDir dir;
  const std::string path = dir.file("x.h5");
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {0, 6}, max_dims[2] = {10, 6}, chunk[2] = {20, 6}, extended[2] = {10, 6};
  const hid_t space = H5Screate_simple(2, dims, max_dims);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  REQUIRE(H5Pset_chunk(dcpl, 2, chunk) >= 0);
  const hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(d >= 0);
  REQUIRE(H5Dset_extent(d, extended) >= 0);
  std::vector<float> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(i);
  REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
  Chunked shape;
  shape.rows = 10;
  shape.cols = 6;
  require_reads_back(path, shape);
}

TEST_CASE("chunk index check: a chunk that skipped its filter stored whole reads back", "[h5][data]") {
  // libhdf5 leaves a chunk unfiltered where an optional filter fails; here
  // written raw with its mask saying deflate was skipped.
  test::TempDir dir;
  Chunked c;
  const std::string path = make_chunked(dir, "x.h5", c);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "x", H5P_DEFAULT);
  std::vector<float> row(c.cols);
  for (hsize_t j = 0; j < c.cols; ++j) row[j] = value(3 * c.cols + j);
  const hsize_t offset[2] = {3, 0};
  REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 1u, offset, row.size() * sizeof(float), row.data()) >= 0);
  // Stored in more bytes than a chunk: libhdf5 reads its first ones (the
  // review found the first version refusing it).
  row.resize(c.cols + 2, 99.0f);
  for (hsize_t j = 0; j < c.cols; ++j) row[j] = value(5 * c.cols + j);
  const hsize_t offset5[2] = {5, 0};
  REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 1u, offset5, row.size() * sizeof(float), row.data()) >= 0);
  H5Dclose(d);
  H5Fclose(f);
  require_reads_back(path, c);
}

TEST_CASE("chunk index check: damage libhdf5 does not check is an error naming the file and dataset", "[h5][data]") {
  test::TempDir dir;
  // 1.8's format checksums the object headers (libhdf5 refuses a damaged
  // one) but not the chunk B-tree: the walk reads both formats alike.
  const Format format = GENERATE(Format::original, Format::v18);
  INFO("format " << format_name(format));
  const auto chunked = [format] {
    Chunked c;
    c.format = format;
    return c;
  };
  Chunked deep = chunked();  // a root over internal nodes over leaves
  deep.rows = 5000;
  deep.cols = 8;
  deep.chunk = {1, 8};
  SECTION("a node that is not a chunk B-tree node") {
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const auto nodes = chunk_nodes(file_bytes(path));
    REQUIRE(nodes.size() == 1);
    poke(path, nodes[0].at + 4, std::string(1, '\0'));  // a group's B-tree type
    require_damage_named(path, "no chunk B-tree node");
  }
  SECTION("a chunk's address past the end of the file") {
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const auto nodes = chunk_nodes(file_bytes(path));
    poke(path, child_at(nodes[0], 5), le8(uint64_t{1} << 40));
    require_damage_named(path, "a chunk at address 1099511627776");
  }
  SECTION("more entries than the file's K allows") {
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const auto nodes = chunk_nodes(file_bytes(path));
    poke(path, nodes[0].at + 6, std::string("\x41\x00", 2));  // 65 > 2 x 32
    require_damage_named(path, "with 65 children, at most 64");
  }
  SECTION("more entries than the file's own small K allows (superblock 1; 1.8's superblock extension)") {
    Chunked c = chunked();
    c.rows = 300;
    c.cols = 8;
    c.chunk = {1, 8};
    c.istore_k = 2;
    const std::string path = make_chunked(dir, "x.h5", c);
    const auto nodes = chunk_nodes(file_bytes(path));
    REQUIRE(nodes.size() > 1);
    REQUIRE(nodes[0].used <= 4);
    poke(path, nodes[0].at + 6, std::string("\x05\x00", 2));  // 5 > 2 x 2
    require_damage_named(path, "with 5 children, at most 4");
  }
  SECTION("an unfiltered chunk's address moved onto its neighbour (read as data before)") {
    Chunked c = chunked();
    c.deflate = false;
    const std::string path = make_chunked(dir, "x.h5", c);
    const std::string bytes = file_bytes(path);
    const auto nodes = chunk_nodes(bytes);
    const uint64_t chunk = read_le(bytes, child_at(nodes[0], 2), 8);
    poke(path, child_at(nodes[0], 2), le8(chunk + 1));
    testing::require_read_refused(path, "x",
                                  {path + ": the file's structures overlap (",
                                   "a chunk of 'x' (256 bytes at file offset ", std::to_string(chunk + 1) + ")"});
  }
  SECTION("a node of the wrong level") {
    const std::string path = make_chunked(dir, "x.h5", deep);
    const auto nodes = chunk_nodes(file_bytes(path));
    size_t leaf = 0;
    while (leaf < nodes.size() && nodes[leaf].level != 0) ++leaf;
    REQUIRE(leaf < nodes.size());
    poke(path, nodes[leaf].at + 5, std::string(1, '\3'));
    require_damage_named(path, "a chunk B-tree node of level 3 where 0 belongs");
  }
  SECTION("a node reached twice") {
    const std::string path = make_chunked(dir, "x.h5", deep);
    const std::string bytes = file_bytes(path);
    const auto nodes = chunk_nodes(bytes);
    size_t inner = 0;
    while (inner < nodes.size() && !(nodes[inner].level == 1 && nodes[inner].used >= 2)) ++inner;
    REQUIRE(inner < nodes.size());
    poke(path, child_at(nodes[inner], 1), bytes.substr(child_at(nodes[inner], 0), 8));
    require_damage_named(path, "a chunk B-tree node reached twice");
  }
  SECTION("an unfiltered chunk stored in fewer bytes than a chunk") {
    Chunked c = chunked();
    c.deflate = false;
    const std::string path = make_chunked(dir, "x.h5", c);
    const auto nodes = chunk_nodes(file_bytes(path));
    REQUIRE(read_le(file_bytes(path), key_at(nodes[0], 3), 4) == 256);
    poke(path, key_at(nodes[0], 3), le4(100));
    expect_stored_unfiltered(path, "in 100 bytes, expected 256 (the chunk at [3, 0]");
  }
  SECTION("a filter pipeline message whose type is damaged (deflate hidden)") {
    // Session 62's fuzzing: libhdf5 then read the compressed chunks as
    // whole raw ones out of buffers of their stored size (SIGSEGV).
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const std::string bytes = file_bytes(path);
    size_t message = 0;
    if (format == Format::original) {
      const size_t name = bytes.find(std::string("deflate\0", 8));
      REQUIRE(name != std::string::npos);
      message = name - 16 - 8;  // version-1 pipeline: 8 bytes, then id, name length, flags, values
      REQUIRE(read_le(bytes, message, 2) == 0x0B);
    } else {  // a version-2 message header (type, size, flags), then version 2, 1 filter, deflate unnamed
      const size_t body = bytes.find(std::string("\x02\x01\x01\x00", 4));
      REQUIRE(body != std::string::npos);
      message = body - 4;
      REQUIRE(read_le(bytes, message, 3) == 0x000C0B);
    }
    poke(path, message, std::string("\xf4", 1));
    expect_stored_unfiltered(path, "bytes, expected 256 (the chunk at [0, 0]");
  }
  SECTION("keys out of order (a chunk hidden, another shown twice)") {
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const auto nodes = chunk_nodes(file_bytes(path));
    poke(path, key_at(nodes[0], 0) + 8, le8(2));  // the first chunk's row: 0 -> 2
    require_damage_named(path, "chunk B-tree keys out of order: [2, 0] before [1, 0]");
  }
  SECTION("a chunk outside the dataset (its dataspace damaged smaller)") {
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const std::string bytes = file_bytes(path);
    const size_t dims = bytes.find(le8(8) + le8(64));  // the dataspace message's dimensions
    REQUIRE(dims != std::string::npos);
    poke(path, dims, le8(6));
    require_damage_named(path, "a chunk at [6, 0] outside the dataset's 6x64");
  }
  SECTION("a dataspace past its maximum (a read of 2^40 rows of fill values)") {
    const std::string path = make_chunked(dir, "x.h5", chunked());
    const size_t dims = file_bytes(path).find(le8(8) + le8(64) + le8(8) + le8(64));  // dimensions, then maxima
    REQUIRE(dims != std::string::npos);
    poke(path, dims, le8(uint64_t{1} << 40));
    testing::require_read_refused(path, "x",
                                  {path + ": dataset 'x': its chunked layout is damaged (a dataspace of 1099511627776 "
                                          "along axis 0, past its maximum 8"});
  }
  SECTION("a chunk off the grid of chunks") {
    Chunked c = chunked();
    c.chunk = {2, 16};
    const std::string path = make_chunked(dir, "x.h5", c);
    const auto nodes = chunk_nodes(file_bytes(path));
    poke(path, key_at(nodes[0], 1) + 16, le8(17));  // its column offset: 16 -> 17
    require_damage_named(path, "a chunk at [0, 17] off the grid of chunks of 2x16");
  }
  SECTION("a filter mask saying a compressed chunk skipped deflate") {
    Chunked c = chunked();
    c.shuffle = true;  // shuffle keeps the size: the mask must skip deflate (bit 1) for the chunk to be raw
    c.chunk = {2, 16};
    const std::string path = make_chunked(dir, "x.h5", c);
    const auto nodes = chunk_nodes(file_bytes(path));
    poke(path, key_at(nodes[0], 2) + 4, std::string("\x02", 1));
    expect_stored_unfiltered(path, "bytes, expected 128 (the chunk at [0, 32]; its entry in the chunk index");
  }
}

TEST_CASE("chunk index check: a dataset whose filter pipeline message is shared keeps the per-read check",
          "[h5][data]") {
  // The review: with pipelines in the file's shared-message heap, y's
  // pipeline message is a reference the walk does not follow, so it could
  // not check y's filter masks -- and yet listed y as checked, which
  // skipped the per-read check: a mask saying "deflate skipped" then made
  // libhdf5 copy 256 bytes out of 136 (wrong values, a heap over-read).
  test::TempDir dir;
  const std::string path = dir.file("shared_pipeline.h5");
  const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
  REQUIRE(H5Pset_shared_mesg_nindexes(fcpl, 1) >= 0);
  REQUIRE(H5Pset_shared_mesg_index(fcpl, 0, H5O_SHMESG_PLINE_FLAG, 0) >= 0);
  REQUIRE(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  H5Pclose(fcpl);
  H5Pclose(fapl);
  REQUIRE(f >= 0);
  const hsize_t dims[2] = {8, 64}, chunk[2] = {1, 64};
  const hid_t space = H5Screate_simple(2, dims, nullptr), dcpl = H5Pcreate(H5P_DATASET_CREATE);
  REQUIRE(H5Pset_chunk(dcpl, 2, chunk) >= 0);
  REQUIRE(H5Pset_deflate(dcpl, 1) >= 0);
  std::vector<float> v(512);
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(i);
  for (const char* name : {"x", "y"}) {
    const hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(d >= 0);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
    H5Dclose(d);
  }
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
  CHECK(data::check_symbol_table_structure(path).count("y") == 0);
  CHECK(data::H5File::open_read(path).read("y", DType::F32).data<float>()[511] == value(511));
  // Each chunk's mask in y's B-tree (the one whose first child is y's
  // first chunk): "deflate skipped".
  haddr_t first = HADDR_UNDEF;
  {
    const hid_t g = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(g, "y", H5P_DEFAULT);
    const hsize_t origin[2] = {0, 0};
    unsigned mask = 0;
    hsize_t stored = 0;
    REQUIRE(H5Dget_chunk_info_by_coord(d, origin, &mask, &first, &stored) >= 0);
    H5Dclose(d);
    H5Fclose(g);
  }
  const std::string bytes = file_bytes(path);
  bool found = false;
  for (const Node& n : chunk_nodes(bytes)) {
    if (read_le(bytes, child_at(n, 0), 8) != first) continue;
    found = true;
    for (size_t i = 0; i < n.used; ++i) poke(path, key_at(n, i) + 4, std::string("\x01", 1));
  }
  REQUIRE(found);
  testing::require_read_refused(path, "y",
                                {path + ": dataset 'y': its chunk is stored unfiltered in ", "expected 256"});
}

TEST_CASE("chunk index check: a damaged chunk shape is an error before libhdf5 reads past a chunk", "[h5][data]") {
  // Session 62's fuzzing: a chunk dimension of a gzip-compressed CosmoFlow
  // file damaged from 16 to 65296 made `downsample` die of SIGSEGV.
  test::TempDir dir;
  const std::string path = make_chunked(dir, "x.h5", Chunked{});
  const auto nodes = chunk_nodes(file_bytes(path));
  const size_t dims = chunk_dims_at(file_bytes(path), nodes[0].at);
  REQUIRE(read_le(file_bytes(path), dims, 4) == 1);
  REQUIRE(read_le(file_bytes(path), dims + 4, 4) == 64);
  REQUIRE(read_le(file_bytes(path), dims + 8, 4) == 4);
  std::string what;
  SECTION("past the dataset's fixed size") {
    poke(path, dims + 4, le4(65296));
    what =
        "compressed chunks of 65296 along axis 1, where the dataset has 64 at most; if the file is sound, "
        "`h5repack -l DATASET:CHUNK=...` rewrites it in smaller chunks";
  }
  SECTION("a dimension of 0") {
    poke(path, dims, le4(0));
    what = "a chunk dimension of 0 along axis 0";
  }
  SECTION("another element size") {
    poke(path, dims + 8, le4(8));
    what = "chunks of 8-byte elements, where the datatype's have 4";
  }
  testing::require_read_refused(path, "x",
                                {path + ": dataset 'x': its chunked layout is damaged (" + what + ", at file offset "});
}

TEST_CASE("chunk index check: a chunk dimension of 0 is refused where the dataspace was not read", "[h5][data]") {
  // A shared dataspace message is a reference the walk does not follow:
  // the chunk grid's divisions must not meet a 0 all the same.
  test::TempDir dir;
  const std::string path = make_chunked(dir, "x.h5", Chunked{});
  const auto nodes = chunk_nodes(file_bytes(path));
  data::ChunkedLayout layout;
  layout.dataset = "x";
  layout.tree = nodes[0].at;  // no userblock: addresses are file offsets
  layout.chunk = {0, 64, 4};
  layout.resizing = 1u;  // deflate, the pipeline's filter 0
  const data::RawFileBytes file(path, path);
  data::ChunkIndexWalk walk{file, path, 0, 64, uint64_t{1} << 20};
  CHECK_THROWS_WITH(data::check_chunk_index(walk, layout), Catch::Contains("a chunk dimension of 0 along axis 0"));
  layout.chunk = {1, 64, 4};  // the file's own: sound
  CHECK_NOTHROW(data::check_chunk_index(walk, layout));
}

TEST_CASE("chunk index check: datasets in new-style groups (links in the object header) are walked", "[h5][data]") {
  // A group that tracks creation order (h5py's track_order=True) keeps its
  // links as link messages in its object header, not in a symbol table:
  // the walk follows their hard links too.
  test::TempDir dir;
  const std::string path = dir.file("ns.h5");
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  REQUIRE(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) >= 0);
  const hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, gcpl, H5P_DEFAULT);
  REQUIRE(g >= 0);
  REQUIRE(H5Lcreate_soft("/g/x", g, "soft", H5P_DEFAULT, H5P_DEFAULT) >= 0);  // skipped: no object of its own
  const hsize_t dims[2] = {8, 64}, chunk[2] = {1, 64};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  REQUIRE(H5Pset_chunk(dcpl, 2, chunk) >= 0);
  REQUIRE(H5Pset_deflate(dcpl, 1) >= 0);
  const hid_t d = H5Dcreate2(g, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  std::vector<float> v(512);
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(i);
  REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Gclose(g);
  H5Pclose(gcpl);
  H5Fclose(f);
  const std::string bytes = file_bytes(path);
  REQUIRE(bytes[8] == 0);  // superblock 0: the original format, walked
  CHECK(data::check_symbol_table_structure(path).count("g/x") == 1);
  CHECK(data::H5File::open_read(path).read("g/x", DType::F32).numel() == 512);
  SECTION("a damaged filter mask in it is named with the group") {
    const auto nodes = chunk_nodes(bytes);
    REQUIRE(nodes.size() == 1);
    poke(path, key_at(nodes[0], 1) + 4, std::string("\x01", 1));
    testing::require_read_refused(path, "g/x",
                                  {path + ": dataset 'g/x': its chunk is stored unfiltered in ", "expected 256"});
  }
  SECTION("a damaged address in the group's link info message is named") {
    // Where links past 8 would go (a fractal heap): undefined until then.
    // Made defined, libhdf5 followed it (SIGSEGV; session 62's fuzzing).
    // Its body: version 0, flags 3 (creation order tracked and indexed),
    // the largest creation order (8 bytes), three undefined addresses.
    size_t at = bytes.find(std::string("\x00\x03", 2));
    while (at != std::string::npos && bytes.compare(at + 10, 24, std::string(24, '\xff')) != 0)
      at = bytes.find(std::string("\x00\x03", 2), at + 1);
    REQUIRE(at != std::string::npos);
    poke(path, at + 10, le8(64));
    testing::require_read_refused(path, "g/x",
                                  {path + ": the file's group structure is damaged (no fractal heap of links where "
                                          "the group's link info message says, at file offset 64)"});
    poke(path, at + 10, le8(uint64_t{1} << 40));
    testing::require_read_refused(path, "g/x", {"(a group's fractal heap of links at address 1099511627776"});
  }
  SECTION("a damaged hard link address is named") {
    // The link message of "x": version 1, its flags, a creation order,
    // the name's length (1 byte), "x", then the object header's address.
    const size_t name = bytes.find(std::string("\x01x", 2));
    REQUIRE(name != std::string::npos);
    poke(path, name + 2, le8(uint64_t{1} << 40));
    testing::require_read_refused(path, "g/x",
                                  {path + ": the file's group structure is damaged (an object header at address " +
                                   std::to_string(uint64_t{1} << 40)});
  }
}
