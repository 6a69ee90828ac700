#include "data/mapped_shard.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
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
  MapRequest r{file, h.unit_offsets(dataset, dt, rows_per_sample), {}};
  if (r.offsets.empty()) r.packed = h.packed_units(dataset, dt, rows_per_sample);
  return r;
}

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
  for (const MapRequest& r : want) {
    const std::string& path = paths[r.file];
    if (r.offsets.empty() && r.packed.units.empty()) {
      log::debug(
          "{}: '{}' does not lie in the file itself as one unbroken run of little-endian data of its type per "
          "sample, nor as one gzip-compressed chunk per sample (other filters, chunks across samples, external, "
          "never written, or behind a user block): read through HDF5",
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
      MRMF_CHECK_KIND(Data, off >= 0 && f.size() >= off + bytes, path, ": file of ", f.size(), " bytes, but dataset '",
                      dataset, "' needs ", off + bytes, " (truncated?)");
      return f.data() + off;
    };
    std::vector<MappedSample>& at = m.samples[r.file];
    for (int64_t off : r.offsets) at.push_back({place(off, sample_bytes), sample_bytes});
    for (const PackedUnit& u : r.packed.units)
      at.push_back({place(u.offset, u.bytes), u.bytes, u.skipped, true, r.packed.shuffle});
    m.packed = m.packed || !r.packed.units.empty();
    m.maps.push_back(std::move(f));
  }
  return m;
}

void read_mapped(const MappedSample& s, int64_t bytes, DType dt, void* dst, const std::string& what) {
  if (!s.packed) {
    std::memcpy(dst, s.p, static_cast<size_t>(bytes));
    return;
  }
  decode_chunk(s.p, s.stored, s.skipped, s.shuffle, static_cast<int64_t>(dtype_size(dt)), static_cast<char*>(dst),
               bytes, what);
}

bool mapping_agrees(const std::string& path, const std::string& dataset, int64_t row, int64_t rows, DType dt,
                    const MappedSample& mapped, int64_t bytes) {
  std::vector<char> via_hdf5(static_cast<size_t>(bytes)), via_map(static_cast<size_t>(bytes));
  H5File::open_read(path).read_rows_into(dataset, row, rows, dt, via_hdf5.data());
  try {
    read_mapped(mapped, bytes, dt, via_map.data(), path + ": dataset '" + dataset + "'");
  } catch (const Error& e) {
    log::warn("{}; reading through HDF5", e.message());
    return false;
  }
  if (std::memcmp(via_hdf5.data(), via_map.data(), via_hdf5.size()) == 0) return true;
  log::warn("{}: the mapped '{}' differs from what HDF5 reads; reading through HDF5", path, dataset);
  return false;
}

}  // namespace mrmf::data::detail
