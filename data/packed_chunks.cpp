#include "data/packed_chunks.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

namespace mrmf::data {

namespace {

// The zlib stream (the deflate filter's format) at `src` inflated into at
// most `cap` bytes at `out`, its Adler-32 checked: the bytes it decodes to,
// or one of the codes below. libdeflate, not zlib: a whole-buffer decoder,
// 2.1-2.9x zlib's inflate on CosmoFlow counts (bench/results/
// cpu_data_2026-11-30j.txt), and chunks are decoded whole. Never throws;
// thread-safe (a decompressor per thread).
constexpr int64_t kInflateBad = -1;        // not a valid stream, or its checksum does not match
constexpr int64_t kInflateNeedsMore = -2;  // it decodes to more than `cap`
constexpr int64_t kInflateNoMemory = -3;

int64_t inflate_zlib(const void* src, int64_t src_bytes, void* out, int64_t cap) noexcept {
  // One decompressor per thread (~12 KiB, allocated once; one must not be
  // shared between threads), freed when the thread ends. Allocated on first
  // use, and again after a failed allocation.
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  thread_local std::unique_ptr<libdeflate_decompressor, Free> d;
  if (!d) d.reset(libdeflate_alloc_decompressor());
  if (!d) return kInflateNoMemory;
  size_t got = 0;
  switch (
      libdeflate_zlib_decompress(d.get(), src, static_cast<size_t>(src_bytes), out, static_cast<size_t>(cap), &got)) {
    case LIBDEFLATE_SUCCESS: return static_cast<int64_t>(got);
    case LIBDEFLATE_INSUFFICIENT_SPACE: return kInflateNeedsMore;
    default: return kInflateBad;
  }
}

// The deflate filter's zlib stream at `src` into exactly `out_bytes` at
// `out` (inflate_zlib).
void inflate_exactly(const char* src, int64_t src_bytes, char* out, int64_t out_bytes, const std::string& what) {
  const int64_t got = inflate_zlib(src, src_bytes, out, out_bytes);
  MRMF_CHECK(got != kInflateNoMemory, what, ": out of memory for a decompressor (libdeflate_alloc_decompressor)");
  MRMF_CHECK_KIND(Data, got == out_bytes, what, ": its gzip-compressed chunk (", src_bytes,
                  " bytes) does not decode to the ", out_bytes, " bytes expected (",
                  got == kInflateNeedsMore ? std::string("it decodes to more")
                  : got == kInflateBad     ? std::string("its stream or checksum is invalid")
                                           : "it decodes to " + std::to_string(got),
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

// n runs of `Run` bytes (0: `run` bytes), run k from src + k * sstep to
// dst + k * dstep. A run may be a single element (a channels-last sample
// chunked by channel): copies of a compile-time size, not a memcpy call each.
template <size_t Run>
void copy_runs(char* dst, const char* src, int64_t n, int64_t dstep, int64_t sstep, size_t run) {
  const size_t bytes = Run > 0 ? Run : run;
  for (int64_t k = 0; k < n; ++k) std::memcpy(dst + k * dstep, src + k * sstep, bytes);
}

// Which of the pipeline's filters (shuffle: shuffle then deflate, else
// deflate alone) the chunk with filter mask `skipped` went through.
bool was_shuffled(uint32_t skipped, bool shuffle) { return shuffle && !(skipped & 1u); }
bool was_deflated(uint32_t skipped, bool shuffle) { return !(skipped & (shuffle ? 2u : 1u)); }

// A chunk stored unfiltered must hold the bytes it stands for; its first
// ones where it holds more, as libhdf5 reads it (a raw chunk written with
// H5Dwrite_chunk may).
void check_unfiltered(int64_t src_bytes, int64_t out_bytes, const std::string& what) {
  MRMF_CHECK_KIND(Data, src_bytes >= out_bytes, what, stored_unfiltered_phrase(), src_bytes, " bytes, expected ",
                  out_bytes, "; the file may be corrupt");
}

}  // namespace

void decode_chunk(const char* src, int64_t src_bytes, uint32_t skipped, bool shuffle, int64_t elem_size, char* out,
                  int64_t out_bytes, const std::string& what) {
  // The deflate step undone into `dst`: inflated, or copied where skipped.
  const auto undeflate = [&](char* dst) {
    if (was_deflated(skipped, shuffle)) return inflate_exactly(src, src_bytes, dst, out_bytes, what);
    check_unfiltered(src_bytes, out_bytes, what);
    std::memcpy(dst, src, static_cast<size_t>(out_bytes));
  };
  if (!was_shuffled(skipped, shuffle)) return undeflate(out);
  // Into a buffer of the call's own (not zeroed: every byte is written),
  // then unshuffled.
  const std::unique_ptr<char[]> staged(new char[static_cast<size_t>(out_bytes)]);
  undeflate(staged.get());
  unshuffle(staged.get(), out_bytes, elem_size, out);
}

const char* stored_unfiltered_phrase() { return ": its chunk is stored unfiltered in "; }

bool is_unfiltered_size_error(const Error& e) {
  return e.kind() == ErrorKind::Data && e.message().find(stored_unfiltered_phrase()) != std::string::npos;
}

ChunkRows chunk_rows(int64_t rows, int64_t unit_rows, int64_t chunk0) {
  if (rows == unit_rows || unit_rows % chunk0 == 0) return {};
  if (chunk0 % unit_rows == 0) return {ChunkRows::WholeUnits, chunk0 / unit_rows};
  return {ChunkRows::PartsOfUnits, 1};
}

bool chunks_worth_locating(double chunks, int64_t chunk_bytes, int64_t units_per_chunk, bool compressed) {
  if (chunks <= static_cast<double>(kAlwaysLocatedChunks)) return true;
  // n^2 x 8 ns <= n x bytes x units x (4 or 0.5) ns, i.e. 16 n <= bytes x
  // units x (8 or 1): whole numbers, exact in double below 2^53.
  return 16 * chunks <=
         static_cast<double>(chunk_bytes) * static_cast<double>(units_per_chunk) * (compressed ? 8.0 : 1.0);
}

ChunkCount count_chunks(const std::vector<int64_t>& dims, const std::vector<int64_t>& chunk, int64_t unit_rows,
                        int64_t elem_size) {
  MRMF_CHECK(!dims.empty() && chunk.size() == dims.size() && unit_rows > 0 && dims[0] % unit_rows == 0,
             "count_chunks: a dataset of rank ", dims.size(), " in chunks of rank ", chunk.size(), " and samples of ",
             unit_rows, " rows");
  for (size_t i = 0; i < chunk.size(); ++i) MRMF_CHECK(chunk[i] > 0, "count_chunks: a chunk of 0 along axis ", i);
  ChunkCount n;
  const int64_t r = unit_rows, c0 = chunk[0];
  n.rows = chunk_rows(dims[0], r, c0);
  n.chunks = static_cast<double>((dims[0] + c0 - 1) / c0);
  n.per_unit = c0 < r ? static_cast<double>((r + c0 - 1) / c0) : 1;
  n.chunk_bytes = static_cast<double>(elem_size) * static_cast<double>(c0);
  for (size_t i = 1; i < dims.size(); ++i) {
    const double c = static_cast<double>((dims[i] + chunk[i] - 1) / chunk[i]);
    n.chunks *= c;
    n.per_unit *= c;
    n.chunk_bytes *= static_cast<double>(chunk[i]);
  }
  if (n.rows.kind == ChunkRows::WholeUnits) n.sharing = std::min(c0, dims[0]) / r;
  return n;
}

bool ChunkCount::worth_locating(bool compressed) const {
  return rows.kind != ChunkRows::PartsOfUnits && chunks > 0 && chunks <= static_cast<double>(kMaxLocatedChunks) &&
         chunk_bytes <= 9e15 && chunks_worth_locating(chunks, static_cast<int64_t>(chunk_bytes), sharing, compressed);
}

int64_t ChunkGrid::chunks_per_unit() const {
  int64_t n = 1;
  for (size_t i = 0; i < unit.size(); ++i) n *= (unit[i] + chunk[i] - 1) / chunk[i];
  return n;
}

void decode_unit(const ChunkGrid& g, const std::function<StoredChunk(int64_t)>& chunk_at, bool shuffle,
                 int64_t elem_size, char* out, int64_t out_bytes, const std::string& what, int64_t first_row) {
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
  MRMF_CHECK(first_row == 0 || (first_row > 0 && first_row + g.unit[0] <= g.chunk[0]), "decode_unit: rows from ",
             first_row, " of a unit of ", g.unit[0], " rows outside a chunk of ", g.chunk[0]);
  // The trailing axes a chunk spans whole are one run in both layouts:
  // each copy is a run over axis j and all after it (for CosmoFlow's
  // channels-last cubes split along space, one chunk row of all channels;
  // for LBANN's channels-first files chunked by channel, the whole chunk).
  size_t j = n - 1;
  while (j > 0 && g.chunk[j] == g.unit[j]) --j;
  int64_t tail = 1;  // elements per step of axis j
  for (size_t i = j + 1; i < n; ++i) tail *= g.unit[i];
  const int64_t chunk_bytes = chunk_elems * elem_size;
  std::unique_ptr<char[]> buf;  // a chunk decoded (not zeroed: every byte is written), when one is not decoded in place
  std::vector<int64_t> at(n, 0), origin(n), extent(n);
  const int64_t chunks = g.chunks_per_unit();
  for (int64_t k = 0; k < chunks; ++k) {
    for (size_t i = 0; i < n; ++i) {
      origin[i] = at[i] * g.chunk[i];
      extent[i] = std::min(g.chunk[i], g.unit[i] - origin[i]);
    }
    next_in_grid(at, count);
    const StoredChunk c = chunk_at(k);
    const std::string which = what + " (chunk " + std::to_string(k + 1) + " of " + std::to_string(chunks) + ")";
    if (j == 0 && extent[0] == g.chunk[0]) {  // the whole chunk is one run of the unit (LBANN's channel per chunk)
      decode_chunk(c.p, c.bytes, c.skipped, shuffle, elem_size, out + origin[0] * ustride[0] * elem_size, chunk_bytes,
                   which);
      continue;
    }
    // The chunk's elements: where it lies when stored unfiltered (an
    // unfiltered dataset's chunks), else decoded into buf.
    const char* decoded = c.p;
    if (!was_shuffled(c.skipped, shuffle) && !was_deflated(c.skipped, shuffle)) {
      check_unfiltered(c.bytes, chunk_bytes, which);
    } else {
      if (!buf) buf.reset(new char[static_cast<size_t>(chunk_bytes)]);
      decode_chunk(c.p, c.bytes, c.skipped, shuffle, elem_size, buf.get(), chunk_bytes, which);
      decoded = buf.get();
    }
    // Runs over axis j and after; axis j - 1 a loop of fixed steps; the
    // axes before it a walk.
    const size_t run = static_cast<size_t>(extent[j] * tail * elem_size), walk = j > 0 ? j - 1 : 0;
    const int64_t steps = j > 0 ? extent[j - 1] : 1, sstep = j > 0 ? cstride[j - 1] * elem_size : 0,
                  dstep = j > 0 ? ustride[j - 1] * elem_size : 0;
    const std::vector<int64_t> box(extent.begin(), extent.begin() + static_cast<std::ptrdiff_t>(walk));
    std::vector<int64_t> idx(walk, 0);
    do {  // every position of axes [0, j - 1) inside the chunk's part of the unit
      int64_t src = first_row * cstride[0], dst = origin[j] * ustride[j] + (j > 0 ? origin[j - 1] * ustride[j - 1] : 0);
      for (size_t i = 0; i < walk; ++i) {
        src += idx[i] * cstride[i];
        dst += (origin[i] + idx[i]) * ustride[i];
      }
      char* const d = out + dst * elem_size;
      const char* const s = decoded + src * elem_size;
      switch (run) {
        case 1: copy_runs<1>(d, s, steps, dstep, sstep, run); break;
        case 2: copy_runs<2>(d, s, steps, dstep, sstep, run); break;
        case 4: copy_runs<4>(d, s, steps, dstep, sstep, run); break;
        case 8: copy_runs<8>(d, s, steps, dstep, sstep, run); break;
        default: copy_runs<0>(d, s, steps, dstep, sstep, run);
      }
    } while (next_in_grid(idx, box));
  }
}

}  // namespace mrmf::data
