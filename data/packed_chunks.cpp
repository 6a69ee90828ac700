#include "data/packed_chunks.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace mrmf::data {

namespace {

// The deflate filter's zlib stream at `src` into exactly `out_bytes` at `out`.
void inflate_exactly(const char* src, int64_t src_bytes, char* out, int64_t out_bytes, const std::string& what) {
  uLongf got = static_cast<uLongf>(out_bytes);
  const int rc = uncompress(reinterpret_cast<Bytef*>(out), &got, reinterpret_cast<const Bytef*>(src),
                            static_cast<uLong>(src_bytes));
  MRMF_CHECK_KIND(Data, rc == Z_OK && static_cast<int64_t>(got) == out_bytes, what, ": its gzip-compressed chunk (",
                  src_bytes, " bytes) does not decode to the ", out_bytes, " bytes expected (",
                  rc == Z_OK ? "it decodes to " + std::to_string(got) : std::string(zError(rc)),
                  "); the file may be truncated or corrupt");
}

// The shuffle filter undone: byte j of element i is at j * n + i; bytes
// past the last whole element are stored as they are.
void unshuffle(const char* in, int64_t bytes, int64_t elem_size, char* out) {
  const int64_t n = bytes / elem_size;
  for (int64_t j = 0; j < elem_size; ++j) {
    const char* plane = in + j * n;
    for (int64_t i = 0; i < n; ++i) out[i * elem_size + j] = plane[i];
  }
  std::memcpy(out + n * elem_size, in + n * elem_size, static_cast<size_t>(bytes - n * elem_size));
}

}  // namespace

void decode_chunk(const char* src, int64_t src_bytes, uint32_t skipped, bool shuffle, int64_t elem_size, char* out,
                  int64_t out_bytes, const std::string& what) {
  const bool shuffled = shuffle && !(skipped & 1u);
  const bool deflated = !(skipped & (shuffle ? 2u : 1u));
  // The deflate step undone into `dst`: inflated, or copied where skipped.
  const auto undeflate = [&](char* dst) {
    if (deflated) return inflate_exactly(src, src_bytes, dst, out_bytes, what);
    MRMF_CHECK_KIND(Data, src_bytes == out_bytes, what, ": its chunk is stored unfiltered in ", src_bytes,
                    " bytes, expected ", out_bytes, "; the file may be corrupt");
    std::memcpy(dst, src, static_cast<size_t>(out_bytes));
  };
  if (!shuffled) return undeflate(out);
  // Into a buffer of the call's own, then unshuffled.
  std::vector<char> staged(static_cast<size_t>(out_bytes));
  undeflate(staged.data());
  unshuffle(staged.data(), out_bytes, elem_size, out);
}

int64_t ChunkGrid::chunks_per_unit() const {
  int64_t n = 1;
  for (size_t i = 0; i < unit.size(); ++i) n *= (unit[i] + chunk[i] - 1) / chunk[i];
  return n;
}

void decode_unit(const ChunkGrid& g, const std::function<StoredChunk(int64_t)>& chunk_at, bool shuffle,
                 int64_t elem_size, char* out, int64_t out_bytes, const std::string& what) {
  const size_t n = g.unit.size();
  MRMF_CHECK(n >= 1 && g.chunk.size() == n, "decode_unit: a unit of rank ", n, " and a chunk of rank ", g.chunk.size());
  int64_t unit_elems = 1, chunk_elems = 1;
  std::vector<int64_t> count(n), ustride(n), cstride(n);
  for (size_t i = n; i-- > 0;) {
    MRMF_CHECK(g.unit[i] > 0 && g.chunk[i] > 0, "decode_unit: empty unit or chunk axis ", i);
    count[i] = (g.unit[i] + g.chunk[i] - 1) / g.chunk[i];
    ustride[i] = unit_elems;
    cstride[i] = chunk_elems;
    unit_elems *= g.unit[i];
    chunk_elems *= g.chunk[i];
  }
  MRMF_CHECK(unit_elems * elem_size == out_bytes, "decode_unit: ", out_bytes, " bytes for a unit of ", unit_elems,
             " elements of ", elem_size);
  // The trailing axes a chunk spans whole are one run in both layouts:
  // each copy is a run over axis j and all after it (for CosmoFlow's
  // channels-last cubes split along space, one chunk row of all channels;
  // for LBANN's channels-first files chunked by channel, the whole chunk).
  size_t j = n - 1;
  while (j > 0 && g.chunk[j] == g.unit[j]) --j;
  int64_t tail = 1;  // elements per step of axis j
  for (size_t i = j + 1; i < n; ++i) tail *= g.unit[i];
  std::vector<char> buf(static_cast<size_t>(chunk_elems * elem_size));
  std::vector<int64_t> at(n, 0), origin(n), extent(n);
  const int64_t chunks = g.chunks_per_unit();
  for (int64_t k = 0; k < chunks; ++k) {
    const StoredChunk c = chunk_at(k);
    decode_chunk(c.p, c.bytes, c.skipped, shuffle, elem_size, buf.data(), static_cast<int64_t>(buf.size()),
                 what + " (chunk " + std::to_string(k + 1) + " of " + std::to_string(chunks) + ")");
    for (size_t i = 0; i < n; ++i) {
      origin[i] = at[i] * g.chunk[i];
      extent[i] = std::min(g.chunk[i], g.unit[i] - origin[i]);
    }
    const size_t run = static_cast<size_t>(extent[j] * tail * elem_size);
    const std::vector<int64_t> box(extent.begin(), extent.begin() + static_cast<std::ptrdiff_t>(j));
    std::vector<int64_t> idx(j, 0);
    do {  // every position of axes [0, j) inside the chunk's part of the unit
      int64_t src = 0, dst = origin[j] * ustride[j];
      for (size_t i = 0; i < j; ++i) {
        src += idx[i] * cstride[i];
        dst += (origin[i] + idx[i]) * ustride[i];
      }
      std::memcpy(out + dst * elem_size, buf.data() + src * elem_size, run);
    } while (next_in_grid(idx, box));
    next_in_grid(at, count);
  }
}

}  // namespace mrmf::data
