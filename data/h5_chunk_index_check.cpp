#include "data/h5_chunk_index_check.h"

#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "data/packed_chunks.h"

namespace mrmf::data {
namespace {

// The HDF5 file format specification: layout message version 3, filter
// pipeline message versions 1 and 2, version-1 B-tree nodes of type 1
// (raw data chunks), 8-byte addresses (the only size the group walk takes).
constexpr unsigned kLayoutVersion = 3, kContiguousClass = 1, kChunkedClass = 2;
constexpr uint64_t kUndefined = ~uint64_t{0};
constexpr uint64_t kTreeHeader = 24;  // "TREE", type, level, entries (2), left and right siblings
constexpr unsigned kChunkTreeType = 1;
constexpr int kMaxLevels = 64;
constexpr unsigned kMaxFilters = 32;    // H5Z_MAX_NFILTERS: a mask has a bit for each
constexpr uint16_t kShuffleFilter = 2;  // keeps a chunk's size; every other filter may change it

class TreeWalk {
 public:
  TreeWalk(ChunkIndexWalk& w, const ChunkedLayout& l) : w_(w), l_(l) {
    whole_ = 1;
    for (const uint64_t d : l.chunk) whole_ = d != 0 && whole_ > kUndefined / d ? kUndefined : whole_ * d;
    key_ = 8 + 8 * l.chunk.size();  // stored size (4), filter mask (4), an offset per dimension (8 each)
  }

  void node(uint64_t rel, int level, uint64_t from) {
    const auto header = bytes(locate(rel, kTreeHeader, "a chunk B-tree node", from), kTreeHeader);
    const uint64_t at = w_.base + rel;
    if (std::memcmp(header.data(), "TREE", 4) != 0 || header[4] != kChunkTreeType) damaged("no chunk B-tree node", at);
    if (!seen_.insert(at).second) damaged("a chunk B-tree node reached twice (a cycle)", from);
    const int node_level = header[5];
    const uint64_t used = little_endian(&header[6], 2);
    if ((level >= 0 && node_level != level) || node_level >= kMaxLevels)
      damaged("a chunk B-tree node of level " + std::to_string(node_level) + " where " +
                  (level >= 0 ? std::to_string(level) : std::string("fewer than 64")) + " belongs",
              at);
    if (used > w_.two_k)
      damaged("a chunk B-tree node with " + std::to_string(used) + " children, at most " + std::to_string(w_.two_k),
              at);
    if (used == 0) return record(at, kTreeHeader, FileExtents::Kind::chunk_tree);
    // Keys and children alternate: key 0, child 0, ..., child used - 1, key used.
    const uint64_t n = (used + 1) * key_ + used * 8;
    const auto body = bytes(locate(rel + kTreeHeader, n, "a chunk B-tree node's entries", at), n);
    record(at, kTreeHeader + n, FileExtents::Kind::chunk_tree);
    // Keys grow along the node, compared as libhdf5 finds chunks by them:
    // a damaged one hides a chunk (read as the fill value) or shows one
    // twice. The last key bounds the node: it may equal the key before.
    for (uint64_t i = 0; i < used; ++i)
      if (i + 1 < used ? !before(&body[i * (key_ + 8)], &body[(i + 1) * (key_ + 8)])
                       : before(&body[(i + 1) * (key_ + 8)], &body[i * (key_ + 8)]))
        damaged("chunk B-tree keys out of order: " + offsets(&body[i * (key_ + 8)]) + " before " +
                    offsets(&body[(i + 1) * (key_ + 8)]),
                at + kTreeHeader + (i + 1) * (key_ + 8));
    for (uint64_t i = 0; i < used; ++i) {
      const unsigned char* key = &body[i * (key_ + 8)];
      const uint64_t child = little_endian(key + key_, 8);
      if (node_level > 0) {
        node(child, node_level - 1, at);
        continue;
      }
      const uint64_t stored = little_endian(key, 4);
      const uint32_t mask = static_cast<uint32_t>(little_endian(key + 4, 4));
      const uint64_t key_at = at + kTreeHeader + i * (key_ + 8);
      for (size_t d = 0; d < l_.chunk.size(); ++d) {
        const uint64_t o = little_endian(key + 8 + 8 * d, 8);
        if (d + 1 == l_.chunk.size() ? o != 0 : o % l_.chunk[d] != 0)
          damaged("a chunk at " + offsets(key) + " off the grid of chunks of " + shape(), key_at);
        if (l_.dims && d < l_.dims->size() && o >= (*l_.dims)[d])
          damaged("a chunk at " + offsets(key) + " outside the dataset's " + extent(), key_at);
      }
      record(locate(child, stored, "a chunk", key_at), stored, FileExtents::Kind::chunk);
      // libhdf5 1.10 copies a chunk that went through no size-changing
      // filter as a whole chunk out of a buffer of its stored bytes (a
      // larger one is read well: raw chunks written with H5Dwrite_chunk).
      if (l_.resizing && (mask & *l_.resizing) == *l_.resizing && stored < whole_)
        MRMF_THROW(Data, w_.path, ": dataset '", l_.dataset, "'", stored_unfiltered_phrase(), stored,
                   " bytes, expected ", whole_, " (the chunk at ", offsets(key),
                   "; its entry in the chunk index at file offset ", key_at, "); the file may be corrupt");
    }
  }

 private:
  [[noreturn]] void damaged(const std::string& what, uint64_t offset) const {
    MRMF_THROW(Data, w_.path, ": dataset '", l_.dataset, "': its chunk index is damaged (", what, ", at file offset ",
               offset, "), which libhdf5 follows unchecked and can crash on: is the file damaged?");
  }

  void record(uint64_t at, uint64_t n, FileExtents::Kind kind) const {
    if (w_.extents) w_.extents->add(at, n, kind, l_.owner);
  }

  uint64_t locate(uint64_t rel, uint64_t n, const std::string& what, uint64_t referred_from) const {
    if (rel == kUndefined || rel > w_.file.size() || !w_.file.holds(w_.base + rel, n))
      damaged(what + " at address " + (rel == kUndefined ? std::string("undefined") : std::to_string(rel)) + " (" +
                  std::to_string(n) + " bytes) lies outside the " + std::to_string(w_.file.size()) + "-byte file",
              referred_from);
    return w_.base + rel;
  }

  std::vector<unsigned char> bytes(uint64_t offset, uint64_t n) {
    if (n > w_.budget) throw ChunkBudgetSpent{};
    w_.budget -= n;
    std::vector<unsigned char> b(n);
    if (!w_.file.read(offset, b.data(), n)) damaged("a read failed", offset);
    return b;
  }

  // Whether key a's chunk offsets come before key b's (the element-size
  // axis left out).
  bool before(const unsigned char* a, const unsigned char* b) const {
    for (size_t d = 0; d + 1 < l_.chunk.size(); ++d) {
      const uint64_t x = little_endian(a + 8 + 8 * d, 8), y = little_endian(b + 8 + 8 * d, 8);
      if (x != y) return x < y;
    }
    return false;
  }

  std::string extent() const {
    std::string s;
    for (size_t d = 0; d < l_.dims->size(); ++d) s += (d ? "x" : "") + std::to_string((*l_.dims)[d]);
    return s;
  }

  std::string shape() const {
    std::string s;
    for (size_t d = 0; d + 1 < l_.chunk.size(); ++d) s += (d ? "x" : "") + std::to_string(l_.chunk[d]);
    return s;
  }

  // A chunk's first element, as "[0, 8, 0]" (the element-size axis left out).
  std::string offsets(const unsigned char* key) const {
    std::string s = "[";
    for (size_t d = 0; d + 1 < l_.chunk.size(); ++d)
      s += (d ? ", " : "") + std::to_string(little_endian(key + 8 + 8 * d, 8));
    return s + "]";
  }

  ChunkIndexWalk& w_;
  const ChunkedLayout& l_;
  uint64_t whole_ = 0, key_ = 0;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace

std::optional<ChunkedLayout> parse_chunked_layout(const unsigned char* m, uint64_t size) {
  if (size < 3 || m[0] != kLayoutVersion || m[1] != kChunkedClass) return std::nullopt;
  const unsigned dims = m[2];
  if (dims < 2 || size < 3 + 8 + 4 * uint64_t{dims}) return std::nullopt;  // libhdf5 refuses these itself
  ChunkedLayout l;
  l.tree = little_endian(m + 3, 8);
  for (unsigned d = 0; d < dims; ++d) l.chunk.push_back(little_endian(m + 11 + 4 * d, 4));
  return l;
}

std::optional<std::pair<uint64_t, uint64_t>> parse_contiguous_layout(const unsigned char* m, uint64_t size) {
  if (size < 18 || (m[0] != 3 && m[0] != 4) || m[1] != kContiguousClass) return std::nullopt;
  const uint64_t address = little_endian(m + 2, 8);
  if (address == kUndefined) return std::nullopt;
  return std::make_pair(address, little_endian(m + 10, 8));
}

std::optional<uint32_t> parse_resizing_filters(const unsigned char* m, uint64_t size) {
  if (size < 2 || (m[0] != 1 && m[0] != 2) || m[1] > kMaxFilters) return std::nullopt;
  const bool v1 = m[0] == 1;
  uint64_t p = v1 ? 8 : 2;
  uint32_t resizing = 0;
  for (unsigned i = 0; i < m[1]; ++i) {
    if (p + 2 > size) return std::nullopt;
    const auto id = static_cast<uint16_t>(little_endian(m + p, 2));
    p += 2;
    uint64_t name = 0;
    if (v1 || id >= 256) {  // version 2 names only filters outside the library's range
      if (p + 2 > size) return std::nullopt;
      name = little_endian(m + p, 2);
      p += 2;
    }
    if (p + 4 > size) return std::nullopt;
    const uint64_t values = little_endian(m + p + 2, 2);  // after the flags
    p += 4 + name + 4 * values + (v1 && values % 2 ? 4 : 0);
    if (p > size) return std::nullopt;
    if (id != kShuffleFilter) resizing |= 1u << i;
  }
  return resizing;
}

void parse_dataspace(const unsigned char* m, uint64_t size, ChunkedLayout& layout) {
  if (size < 4 || (m[0] != 1 && m[0] != 2) || (m[0] == 2 && m[3] != 1)) return;  // version 2: a simple one only
  const unsigned rank = m[1];
  const bool has_max = (m[2] & 1) != 0;
  const uint64_t p = m[0] == 1 ? 8 : 4;
  if (size < p + 8 * uint64_t{rank} * (has_max ? 2 : 1)) return;
  std::vector<uint64_t> dims, max_dims;
  for (unsigned d = 0; d < rank; ++d) dims.push_back(little_endian(m + p + 8 * d, 8));
  for (unsigned d = 0; d < rank; ++d) max_dims.push_back(has_max ? little_endian(m + p + 8 * (rank + d), 8) : dims[d]);
  layout.dims = std::move(dims);
  layout.max_dims = std::move(max_dims);
}

void parse_element_size(const unsigned char* m, uint64_t size, ChunkedLayout& layout) {
  if (size >= 8) layout.element = little_endian(m + 4, 4);  // class and version, class bits (3), size (4)
}

void check_chunk_index(ChunkIndexWalk& walk, const ChunkedLayout& layout) {
  const auto& c = layout.chunk;
  const auto misfit = [&](const std::string& what) {
    MRMF_THROW(Data, walk.path, ": dataset '", layout.dataset, "': its chunked layout is damaged (", what,
               ", at file offset ", layout.message_at,
               "), which libhdf5 follows unchecked and can crash on: is the file damaged?");
  };
  // Also where the dataspace was not read: the walk divides by them.
  for (size_t d = 0; d + 1 < c.size(); ++d)
    if (c[d] == 0) misfit("a chunk dimension of 0 along axis " + std::to_string(d));
  if (layout.dims) {
    const auto& dims = *layout.dims;
    const auto& max_dims = *layout.max_dims;
    if (c.size() != dims.size() + 1)
      misfit("chunks of " + std::to_string(c.size() - 1) + " dimensions in a dataset of " +
             std::to_string(dims.size()));
    for (size_t d = 0; d < dims.size(); ++d) {
      if (max_dims[d] != kUnlimited && dims[d] > max_dims[d])
        misfit("a dataspace of " + std::to_string(dims[d]) + " along axis " + std::to_string(d) +
               ", past its maximum " + std::to_string(max_dims[d]));
      // libhdf5 checks this only when the dataset is made, and not where
      // it is made empty along that axis (then extended): a valid file
      // may break it, and reads well where every chunk's stored size says
      // what it holds -- not where a filter's output does (the damage
      // that crashed libhdf5 was on a compressed dataset), so only there.
      if (layout.resizing.value_or(0) != 0 && dims[d] != 0 && max_dims[d] != kUnlimited && max_dims[d] < c[d])
        misfit("compressed chunks of " + std::to_string(c[d]) + " along axis " + std::to_string(d) +
               ", where the dataset has " + std::to_string(max_dims[d]) +
               " at most; if the file is sound, `h5repack -l DATASET:CHUNK=...` rewrites it in smaller chunks");
    }
  }
  if (layout.element && c.back() != *layout.element)
    misfit("chunks of " + std::to_string(c.back()) + "-byte elements, where the datatype's have " +
           std::to_string(*layout.element));
  if (layout.tree == kUndefined) return;  // no chunk written yet
  TreeWalk(walk, layout).node(layout.tree, -1, layout.message_at);
}

}  // namespace mrmf::data
