#include "data/mapped_shard.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "data/located_chunks.h"
#include "data/packed_chunks.h"

namespace mrmf::data::detail {

int64_t max_mapped_files() {
  const char* env = std::getenv("MRMF_MAX_MAPPED_FILES");
  if (!env || !*env) return 16384;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(env, &end, 10);
  MRMF_CHECK_KIND(Usage, end && *end == '\0' && errno == 0 && v >= 0, "MRMF_MAX_MAPPED_FILES='", env,
                  "': expected a number of files, 0 or more (0: no file is mapped)");
  return v;
}

MapRequest map_request(const H5File& h, size_t file, const std::string& dataset, DType dt, int64_t rows_per_sample) {
  MapRequest r{file, h.unit_offsets(dataset, dt, rows_per_sample), {}, dt, rows_per_sample};
  if (r.offsets.empty()) r.packed = located_chunks(h, dataset, dt, rows_per_sample);  // once per process and file
  return r;
}

namespace {
// A count held in a double (exact below 2^53), as an integer.
std::string count_text(double n) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", n);
  return b;
}
std::string joined(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}
}  // namespace

std::string shared_chunks_notice(const std::string& path, const std::string& dataset, const ChunkGrid& g) {
  return path + ": '" + dataset + "' is stored compressed in chunks of " + joined(g.chunk, "x") + ", each holding " +
         std::to_string(g.units_per_chunk) +
         " samples: the loader's threads inflate a whole chunk to read each of its samples, " +
         std::to_string(g.units_per_chunk) + " times the work of a sample per chunk. `h5repack -l " + dataset +
         ":CHUNK=" + joined(g.unit, "x") + " IN.h5 OUT.h5` rewrites a file a sample per chunk.";
}

std::string layout_advice(const H5File& h, const std::string& dataset, DType dtype, int64_t rows_per_sample) {
  const std::vector<int64_t> dims = h.shape(dataset);
  const int64_t r = rows_per_sample;
  if (dims.empty() || r <= 0 || dims[0] % r != 0 || !h.stored_as(dataset, dtype)) return {};
  if (std::find(dims.begin(), dims.end(), int64_t{0}) != dims.end()) return {};  // nothing to read
  const H5File::Storage st = h.storage(dataset);
  if (st.chunk.size() != dims.size()) return {};  // not chunked
  const auto& f = st.filters;
  const bool ours = f.empty() || H5File::deflate_pipeline(f);  // filters the loaders undo themselves
  const int64_t c0 = st.chunk[0];
  const ChunkCount n = count_chunks(dims, st.chunk, r, static_cast<int64_t>(dtype_size(dtype)));
  // A chunk holds rows of two samples, but not whole ones (those the
  // loader decodes a chunk per sample: shared_chunks_notice()).
  const bool shared = n.rows.kind == ChunkRows::PartsOfUnits;
  bool inner = false;  // a sample split along its own axes: smaller, or past it (an extendible dataset's chunk)
  for (size_t i = 1; i < dims.size(); ++i) inner = inner || st.chunk[i] != dims[i];
  // The loaders take a sample that is one run of bytes in place
  // (H5File::unit_offsets: unfiltered, whole rows, so also from chunks of
  // several samples), else from its chunks where they are worth locating,
  // each decoded or (unfiltered) copied (H5File::packed_units; chunks of
  // whole samples decoded once for each).
  std::vector<std::string> why;
  if (shared && (!f.empty() || inner))
    why.push_back("a chunk holds rows of several samples (" + std::to_string(c0) + " rows a chunk, " +
                  std::to_string(r) + " a sample)" + (f.empty() ? "" : ", all of which HDF5 decodes to read one"));
  // Chunks of whole samples: how many samples a chunk holds (of those the
  // dataset has) and the bytes it inflates to.
  const bool whole = n.rows.kind == ChunkRows::WholeUnits;
  const int64_t per_chunk = n.sharing;
  const bool large = n.chunk_bytes > static_cast<double>(H5File::kMaxSharedChunkBytes);
  if (whole && !f.empty() && large)
    why.push_back("a chunk of " + std::to_string(per_chunk) + " samples inflates to " +
                  count_text(std::floor(n.chunk_bytes / (1 << 20))) + " MiB, more than the " +
                  std::to_string(H5File::kMaxSharedChunkBytes >> 20) + " MiB the loader inflates for one");
  if (!shared && !n.worth_locating(!f.empty())) {
    char cost[96];
    std::snprintf(cost, sizeof cost, "%.3g s", chunk_lookup_seconds(n.chunks));
    why.push_back("its " + count_text(n.chunks) + " chunks (" + count_text(n.per_unit) +
                  " a sample) are more than the loader locates itself: HDF5 1.10 takes time proportional to their "
                  "number to find each, ~" +
                  cost + " for all, more than a read of the file through HDF5");
  }
  bool shuffled = false;
  if (!ours) {
    std::string names;
    for (const H5File::Filter& x : f) {
      names += (names.empty() ? "" : ", ") + x.name;
      shuffled = shuffled || x.id == H5Z_FILTER_SHUFFLE;
    }
    why.push_back("its filters (" + names + ") are decoded by HDF5 alone");
  }
  if (why.empty()) return {};  // not the layout's doing
  // Chunks of whole samples are no reason by themselves (the loader decodes
  // them), but for HDF5 they are the cost: a read inflates them all, unless
  // the chunk is still in HDF5's chunk cache (1 MiB by default).
  if (!f.empty() && whole && !large)
    why.insert(why.begin(), "a chunk holds the rows of " + std::to_string(per_chunk) +
                                " samples, all of which HDF5 decodes to read one");
  std::string reasons;
  for (const std::string& w : why) reasons += (reasons.empty() ? "" : "; ") + w;
  std::vector<int64_t> per_sample = dims;
  per_sample[0] = r;
  // The rewrite: a sample per chunk, compressed with gzip where the file is
  // compressed -- unless even those chunks would be too many to locate (many
  // small samples), or the file is not compressed: then contiguous (which
  // h5repack writes unfiltered), read in place.
  const bool conti =
      f.empty() || !count_chunks(dims, per_sample, r, static_cast<int64_t>(dtype_size(dtype))).worth_locating(true);
  std::string fix = "-l " + dataset + (conti ? ":CONTI" : ":CHUNK=" + joined(per_sample, "x"));
  if (!ours && !conti) fix += (shuffled ? " -f " + dataset + ":SHUF" : "") + " -f " + dataset + ":GZIP=4";
  return h.path() + ": '" + dataset + "' is stored in chunks of " + joined(st.chunk, "x") +
         (f.empty() ? ""
          : ours    ? " (compressed)"
                    : " (filtered)") +
         ": " + reasons +
         ". The loader reads such files through HDF5 on the process's one I/O thread, a sample at a time (in "
         "every epoch whose samples its cache does not hold). `h5repack " +
         fix + " IN.h5 OUT.h5` rewrites a file so that the threads making a batch on the host " +
         (f.empty() ? "read its samples in place"
          : conti   ? "read its samples in place, uncompressed (in a chunk each, they would be too many to locate)"
                    : std::string("decode its samples") + (ours       ? ""
                                                           : shuffled ? " (its filters replaced by shuffle and gzip)"
                                                                      : " (its filters replaced by gzip)")) +
         ".";
}

namespace {
// layout_advice() for a request that cannot be mapped, or empty (also
// where finding out fails: advice must not stop a loader).
std::string advice_for(const std::string& path, const std::string& dataset, const MapRequest& r) {
  try {
    return layout_advice(H5File::open_read(path), dataset, r.dtype, r.rows_per_sample);
  } catch (const Error& e) {
    log::debug("{}: no layout advice ({})", path, e.message());
    return {};
  }
}
}  // namespace

MappedShard map_shard(const std::vector<std::string>& paths, const std::vector<MapRequest>& want,
                      const std::string& dataset, int64_t sample_bytes) {
  if (want.empty()) return {};
  MappedShard m;
  const int64_t limit = max_mapped_files();
  if (!m.reserve(static_cast<int64_t>(want.size()), limit)) {
    log::info(
        "{} and {} more files: mapping them would take this process's loaders past {} mapped files ({} in use; "
        "MRMF_MAX_MAPPED_FILES); read through HDF5",
        paths[want.front().file], want.size() - 1, limit, MappedShard::files_in_use());
    return {};
  }
  m.samples.resize(paths.size());
  m.grids.resize(paths.size());
  for (const MapRequest& r : want) {
    const std::string& path = paths[r.file];
    if (r.offsets.empty() && r.packed.units.empty()) {
      if (const std::string advice = advice_for(path, dataset, r); !advice.empty()) {
        log::info("{}", advice);
        return {};
      }
      log::debug(
          "{}: '{}' does not lie in the file itself as one unbroken run of little-endian data of its type per "
          "sample, nor in chunks (unfiltered or gzip-compressed) of whole samples or of parts of one, few enough to "
          "locate (other filters, chunks across samples, external, never written, or behind a user block): read "
          "through HDF5",
          path, dataset);
      return {};
    }
    MappedFile f;
    try {
      f = MappedFile::map(path);
    } catch (const Error& e) {  // e.g. the process's mapping count or address-space limit: HDF5 still reads it
      log::warn("{}; reading the shard through HDF5", e.message());
      return {};
    }
    // Each sample's bytes inside the file (checked before a pointer is formed).
    const auto place = [&](int64_t off, int64_t bytes) {
      MRMF_CHECK_KIND(Data, off >= 0 && bytes >= 0 && off <= f.size() && bytes <= f.size() - off, path, ": file of ",
                      f.size(), " bytes, but dataset '", dataset, "' needs ", bytes, " at offset ", off,
                      " (truncated?)");
      return f.data() + off;
    };
    std::vector<MappedSample>& at = m.samples[r.file];
    for (int64_t off : r.offsets) at.push_back({place(off, sample_bytes), sample_bytes});
    for (const PackedUnit& u : r.packed.units)
      at.push_back({place(u.offset, u.bytes), u.bytes, u.skipped, true, r.packed.shuffle});
    // (A sample that is its own chunk is never shared: MappedShard::sample
    // counts entries by the grid's units_per_chunk.)
    MRMF_CHECK(!r.packed.unit_shape.empty() || r.packed.units_per_chunk == 1, path, ": '", dataset,
               "' in chunks shared by ", r.packed.units_per_chunk, " samples without a chunk grid");
    if (!r.packed.unit_shape.empty())
      m.grids[r.file] = {r.packed.unit_shape, r.packed.chunk_shape, r.packed.units_per_chunk};
    m.packed = m.packed || !r.packed.units.empty();
    m.maps.push_back(std::move(f));
  }
  return m;
}

void read_mapped(const MappedShard& m, size_t file, int64_t row, int64_t bytes, DType dt, void* dst,
                 const std::string& what) {
  const MappedSample& s = m.sample(file, row);
  if (!s.packed) {
    std::memcpy(dst, s.p, static_cast<size_t>(bytes));
    return;
  }
  const int64_t elem = static_cast<int64_t>(dtype_size(dt));
  const ChunkGrid& g = m.grids[file];
  if (g.unit.empty())
    return decode_chunk(s.p, s.stored, s.skipped, s.shuffle, elem, static_cast<char*>(dst), bytes, what);
  const MappedSample* chunks = &s;  // the sample's chunks follow its first
  decode_unit(
      g,
      [chunks](int64_t k) {
        return StoredChunk{chunks[k].p, chunks[k].stored, chunks[k].skipped};
      },
      s.shuffle, elem, static_cast<char*>(dst), bytes, what, (row % g.units_per_chunk) * g.unit[0]);
}

bool mapping_agrees(const std::string& path, const std::string& dataset, const MappedShard& m, size_t file,
                    int64_t sample, int64_t rows, DType dt, int64_t bytes) {
  std::vector<char> via_hdf5(static_cast<size_t>(bytes)), via_map(static_cast<size_t>(bytes));
  // The mapped read first: it finds damage libhdf5 crashes on, also in
  // chunks that split samples, which read_rows_into does not check.
  try {
    read_mapped(m, file, sample, bytes, dt, via_map.data(), path + ": dataset '" + dataset + "'");
  } catch (const Error& e) {
    if (is_unfiltered_size_error(e)) throw;
    log::warn("{}; reading through HDF5", e.message());
    return false;
  }
  H5File::open_read(path).read_rows_into(dataset, sample * rows, rows, dt, via_hdf5.data());
  if (std::memcmp(via_hdf5.data(), via_map.data(), via_hdf5.size()) == 0) return true;
  log::warn("{}: the mapped '{}' differs from what HDF5 reads; reading through HDF5", path, dataset);
  return false;
}

}  // namespace mrmf::data::detail
