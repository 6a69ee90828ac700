#include "data/packed_chunks.h"

#include <zlib.h>

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

}  // namespace mrmf::data
