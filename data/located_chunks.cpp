#include "data/located_chunks.h"

#include <sys/stat.h>

#include <deque>
#include <mutex>
#include <tuple>
#include <utility>

#include "data/packed_chunks.h"

namespace mrmf::data::detail {

namespace {

struct Key {
  std::string path, dataset;
  int dtype;
  int64_t rows;
  uint64_t dev, ino;
  int64_t size, mtime_s, mtime_ns;
  bool operator==(const Key& o) const {
    return std::tie(path, dataset, dtype, rows, dev, ino, size, mtime_s, mtime_ns) ==
           std::tie(o.path, o.dataset, o.dtype, o.rows, o.dev, o.ino, o.size, o.mtime_s, o.mtime_ns);
  }
};

struct Record {
  std::mutex m;
  std::deque<std::pair<Key, PackedUnits>> answers;  // oldest first
  int64_t chunks = 0, reused = 0;
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

// Whether the file's first and last listed chunks are where `p` says.
bool still_holds(const H5File& h, const std::string& dataset, const PackedUnits& p, int64_t rows_per_unit) {
  const std::vector<int64_t> dims = h.shape(dataset);
  const int64_t entries = static_cast<int64_t>(p.units.size());
  for (const int64_t at : {int64_t{0}, entries - 1}) {
    const PackedUnit want = p.units[static_cast<size_t>(at)];
    const PackedUnit got =
        h.chunk_place(dataset, chunk_coord(p, dims, rows_per_unit, at / p.per_unit, at % p.per_unit));
    if (got.offset != want.offset || got.bytes != want.bytes ||
        (want.skipped != kNoFilterApplied && got.skipped != want.skipped))
      return false;
  }
  return true;
}

}  // namespace

PackedUnits located_chunks(const H5File& h, const std::string& dataset, DType dtype, int64_t rows_per_unit) {
  struct stat st {};
  if (::stat(h.path().c_str(), &st) != 0) return h.packed_units(dataset, dtype, rows_per_unit);
  const Key key{h.path(),
                dataset,
                static_cast<int>(dtype),
                rows_per_unit,
                static_cast<uint64_t>(st.st_dev),
                static_cast<uint64_t>(st.st_ino),
                static_cast<int64_t>(st.st_size),
                static_cast<int64_t>(st.st_mtim.tv_sec),
                static_cast<int64_t>(st.st_mtim.tv_nsec)};
  Record& r = record();
  {
    std::lock_guard<std::mutex> lock(r.m);
    for (const auto& [k, p] : r.answers)
      if (k == key && still_holds(h, dataset, p, rows_per_unit)) {
        ++r.reused;
        return p;
      }
  }
  PackedUnits p = h.packed_units(dataset, dtype, rows_per_unit);
  const int64_t n = static_cast<int64_t>(p.units.size());
  if (n == 0 || n > kMaxRecordedChunks) return p;
  std::lock_guard<std::mutex> lock(r.m);
  for (auto it = r.answers.begin(); it != r.answers.end();)  // an older answer for the same file and question
    if (std::tie(it->first.path, it->first.dataset, it->first.dtype, it->first.rows) ==
        std::tie(key.path, key.dataset, key.dtype, key.rows)) {
      r.chunks -= static_cast<int64_t>(it->second.units.size());
      it = r.answers.erase(it);
    } else {
      ++it;
    }
  while (!r.answers.empty() && r.chunks + n > kMaxRecordedChunks) {
    r.chunks -= static_cast<int64_t>(r.answers.front().second.units.size());
    r.answers.pop_front();
  }
  r.answers.emplace_back(key, p);
  r.chunks += n;
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
