#include "data/located_chunks.h"

#include <sys/stat.h>

#include <algorithm>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "data/packed_chunks.h"
#include "data/prefetch.h"

namespace mrmf::data::detail {

namespace {

// The file as the open handle sees it (not by path: a file renamed over
// the path after the open must not lend its identity to this one's
// chunks). False where the driver has no descriptor (not the default sec2).
struct Identity {
  uint64_t dev = 0, ino = 0;
  int64_t size = 0, mtime_s = 0, mtime_ns = 0;
  bool operator==(const Identity& o) const {
    return std::tie(dev, ino, size, mtime_s, mtime_ns) == std::tie(o.dev, o.ino, o.size, o.mtime_s, o.mtime_ns);
  }
};
bool identity_of(const H5File& h, Identity* id) {
  // The handle is a POSIX descriptor only under the sec2 driver (the
  // default); another driver's is something else.
  const hid_t fapl = H5Fget_access_plist(h.id());
  if (fapl < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  const bool sec2 = H5Pget_driver(fapl) == H5FD_SEC2;
  H5Pclose(fapl);
  void* handle = nullptr;
  if (!sec2 || H5Fget_vfd_handle(h.id(), H5P_DEFAULT, &handle) < 0 || !handle) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  struct stat st {};
  if (::fstat(*static_cast<int*>(handle), &st) != 0) return false;
  *id = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
         static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec)};
  return true;
}

struct Answer {
  Identity id;
  std::vector<int64_t> dims;
  PackedUnits p;
  uint64_t used = 0;  // when last given or recorded (for dropping the oldest)
};
struct Record {
  std::mutex m;
  std::unordered_map<std::string, Answer> answers;  // by path, dataset, type and rows
  int64_t chunks = 0, reused = 0;
  uint64_t clock = 0;
};
Record& record() {
  static Record* r = new Record;  // never destroyed: loader threads may outlive static destruction
  return *r;
}

// The coordinates of the first element of chunk k of the chunks listed for
// unit run g (PackedUnits::units[g * per_unit + k]).
std::vector<int64_t> chunk_coord(const PackedUnits& p, const std::vector<int64_t>& dims, int64_t rows_per_unit,
                                 int64_t g, int64_t k) {
  std::vector<int64_t> c(dims.size(), 0);
  if (!p.unit_shape.empty()) {
    for (size_t i = dims.size(); i-- > 0;) {
      const int64_t n = (p.unit_shape[i] + p.chunk_shape[i] - 1) / p.chunk_shape[i];
      c[i] = (k % n) * p.chunk_shape[i];
      k /= n;
    }
  }
  c[0] += g * p.units_per_chunk * rows_per_unit;
  return c;
}

// Whether the dataset still has the recorded shape and its first, middle
// and last listed chunks are where the answer says.
bool still_holds(const H5File& h, const std::string& dataset, const Answer& a, int64_t rows_per_unit) {
  if (h.shape(dataset) != a.dims) return false;
  const PackedUnits& p = a.p;
  const int64_t entries = static_cast<int64_t>(p.units.size());
  std::vector<int64_t> at{0, entries / 2, entries - 1};
  at.erase(std::unique(at.begin(), at.end()), at.end());
  for (const int64_t e : at) {
    const PackedUnit want = p.units[static_cast<size_t>(e)];
    const PackedUnit got =
        h.chunk_place(dataset, chunk_coord(p, a.dims, rows_per_unit, e / p.per_unit, e % p.per_unit));
    if (got.offset != want.offset || got.bytes != want.bytes ||
        (want.skipped != kNoFilterApplied && got.skipped != want.skipped))
      return false;
  }
  return true;
}

}  // namespace

PackedUnits located_chunks(const H5File& h, const std::string& dataset, DType dtype, int64_t rows_per_unit) {
  // HDF5 calls below, some under the record's lock: always in the order
  // hdf5_mutex, then the record's.
  std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  Identity id;
  if (!identity_of(h, &id)) return h.packed_units(dataset, dtype, rows_per_unit);
  const std::string key =
      h.path() + '\0' + dataset + '\0' + std::to_string(static_cast<int>(dtype)) + '\0' + std::to_string(rows_per_unit);
  Record& r = record();
  {
    std::lock_guard<std::mutex> lock(r.m);
    const auto it = r.answers.find(key);
    if (it != r.answers.end()) {
      if (it->second.id == id && still_holds(h, dataset, it->second, rows_per_unit)) {
        ++r.reused;
        it->second.used = ++r.clock;
        return it->second.p;
      }
      r.chunks -= static_cast<int64_t>(it->second.p.units.size());  // the file changed: its answer with it
      r.answers.erase(it);
    }
  }
  PackedUnits p = h.packed_units(dataset, dtype, rows_per_unit);
  const int64_t n = static_cast<int64_t>(p.units.size());
  if (n < kRecordedFromChunks || n > kMaxRecordedChunks / 4) return p;  // cheap to find again; or too large to keep
  std::lock_guard<std::mutex> lock(r.m);
  while (!r.answers.empty() && r.chunks + n > kMaxRecordedChunks) {  // the least recently used first
    const auto oldest = std::min_element(r.answers.begin(), r.answers.end(),
                                         [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    r.chunks -= static_cast<int64_t>(oldest->second.p.units.size());
    r.answers.erase(oldest);
  }
  r.chunks += n;
  r.answers[key] = Answer{id, h.shape(dataset), p, ++r.clock};
  return p;
}

int64_t located_chunks_reused() {
  std::lock_guard<std::mutex> lock(record().m);
  return record().reused;
}

void forget_located_chunks() {
  Record& r = record();
  std::lock_guard<std::mutex> lock(r.m);
  r.answers.clear();
  r.chunks = 0;
}

}  // namespace mrmf::data::detail
