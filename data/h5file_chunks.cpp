// Where a dataset's samples lie in the file, for reading them without HDF5:
// contiguous or chunked, plain or compressed (H5File::unit_offsets and
// H5File::packed_units). Split from h5file.cpp to keep each file about one
// thing; the loaders map what these find (data/mapped_shard.cpp).
#include <algorithm>
#include <optional>

#include "data/h5file.h"
#include "data/packed_chunks.h"

namespace mrmf::data {

namespace {
// The place of dataset d's chunk whose first element is at `coord`; none
// where the lookup fails or the chunk was never written (its elements read
// as the fill value). One lookup: HDF5 1.10 walks the chunk index for it
// (chunks_worth_locating in data/packed_chunks.h).
std::optional<PackedUnit> chunk_at(hid_t d, const hsize_t* coord) {
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t bytes = 0;
  if (H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &bytes) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  if (addr == HADDR_UNDEF) return std::nullopt;
  return PackedUnit{static_cast<int64_t>(addr), static_cast<int64_t>(bytes), mask};
}
}  // namespace

std::vector<int64_t> H5File::unit_dims(const std::string& dataset, int64_t rows_per_unit, const char* who) const {
  MRMF_CHECK(rows_per_unit > 0, who, ": rows_per_unit must be positive, got ", rows_per_unit);
  auto dims = shape(dataset);
  if (dims.empty() || dims[0] % rows_per_unit != 0) return {};
  return dims;
}

void H5File::check_skipped_filters(hid_t d, const std::string& dataset, const std::vector<int64_t>& dims, int64_t start,
                                   int64_t count) const {
  if (sound_chunk_indexes_.count(dataset.substr(std::min(dataset.find_first_not_of('/'), dataset.size())))) return;
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d)));
  const int nf = H5Pget_nfilters(dcpl.get());
  if (dims.empty() || count <= 0 || H5Pget_layout(dcpl.get()) != H5D_CHUNKED || nf < 0 || nf > 32) return;
  const int rank = static_cast<int>(dims.size());
  std::vector<hsize_t> chunk(dims.size());
  if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank) return;
  const H5TypeId type(MRMF_H5_CHECK(H5Dget_type(d)));
  // A chunk's bytes unfiltered (edge chunks are stored whole too), the
  // chunks the rows lie in along each axis, and the dataset's chunks.
  int64_t whole = static_cast<int64_t>(H5Tget_size(type.get()));
  std::vector<int64_t> first(dims.size(), 0), last(dims.size(), 0);
  double touched = 1, chunks = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto k = static_cast<int64_t>(chunk[i]);
    if (k <= 0 || dims[i] <= 0) return;
    whole *= k;
    first[i] = i == 0 ? start / k : 0;
    last[i] = i == 0 ? (start + count - 1) / k : (dims[i] - 1) / k;
    touched *= static_cast<double>(last[i] - first[i] + 1);
    chunks *= static_cast<double>((dims[i] + k - 1) / k);
  }
  // HDF5 1.10 finds a chunk's mask by walking the chunk index
  // (chunk_lookup_seconds); past ~0.1 s of lookups for one read, none.
  if (touched * chunk_lookup_seconds(chunks) / chunks > 0.1) return;
  // Filters that keep a chunk's size (shuffle): skipping all the others
  // leaves it stored whole.
  uint32_t resizing = 0;
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0;
    size_t nvalues = 0;
    if (H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, 0, nullptr, nullptr) !=
        H5Z_FILTER_SHUFFLE)
      resizing |= 1u << i;
  }
  std::vector<int64_t> at = first;  // chunk coordinates, the last axis fastest
  std::vector<hsize_t> coord(dims.size(), 0);
  while (true) {
    for (size_t i = 0; i < dims.size(); ++i) coord[i] = static_cast<hsize_t>(at[i]) * chunk[i];
    const std::optional<PackedUnit> unit = chunk_at(d, coord.data());
    if (unit && (unit->skipped & resizing) == resizing && unit->bytes < whole)
      MRMF_THROW(Data, path_, ": dataset '", dataset, "'", stored_unfiltered_phrase(), unit->bytes, " bytes, expected ",
                 whole, "; the file may be corrupt");
    size_t i = dims.size();
    while (i > 0 && ++at[i - 1] > last[i - 1]) {
      at[i - 1] = first[i - 1];
      --i;
    }
    if (i == 0) return;
  }
}

std::vector<PackedUnit> H5File::row_chunks(hid_t d, hid_t dcpl, const std::vector<int64_t>& dims, int64_t row_bytes,
                                           int64_t* rows_per_chunk) const {
  if (dims.empty() || H5Pget_layout(dcpl) != H5D_CHUNKED) return {};
  const int rank = static_cast<int>(dims.size());
  std::vector<hsize_t> chunk(dims.size());
  if (H5Pget_chunk(dcpl, rank, chunk.data()) != rank) return {};
  for (int i = 1; i < rank; ++i)
    if (static_cast<int64_t>(chunk[static_cast<size_t>(i)]) != dims[static_cast<size_t>(i)]) return {};
  const int64_t k = static_cast<int64_t>(chunk[0]);
  *rows_per_chunk = k;
  // Each chunk's place by its coordinates: a lookup per chunk, each walking
  // HDF5's index, so only where they are worth it (data/packed_chunks.h).
  const int64_t n = (dims[0] + k - 1) / k;
  if (n > kMaxLocatedChunks || !chunks_worth_locating(static_cast<double>(n), k * row_bytes, 1, false)) return {};
  std::vector<PackedUnit> places(static_cast<size_t>(n));
  std::vector<hsize_t> coord(dims.size(), 0);
  for (size_t c = 0; c < places.size(); ++c) {
    coord[0] = static_cast<hsize_t>(c) * static_cast<hsize_t>(k);
    const std::optional<PackedUnit> at = chunk_at(d, coord.data());
    if (!at) return {};
    places[c] = *at;
  }
  return places;
}

std::vector<int64_t> H5File::unit_offsets(const std::string& dataset, DType dtype, int64_t rows_per_unit) const {
  const auto dims = unit_dims(dataset, rows_per_unit, "unit_offsets");
  if (dims.empty()) return {};
  int64_t row_elems = 1;
  for (size_t i = 1; i < dims.size(); ++i) row_elems *= dims[i];
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype)), row_bytes = row_elems * elem;
  const int64_t units = dims[0] / rows_per_unit, unit_bytes = rows_per_unit * row_bytes;
  std::vector<int64_t> offsets(static_cast<size_t>(units));
  if (const int64_t off = contiguous_offset(dataset, dtype); off >= 0) {
    for (int64_t u = 0; u < units; ++u) offsets[static_cast<size_t>(u)] = off + u * unit_bytes;
    return offsets;
  }
  H5DatasetId d = open_dataset(dataset);
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d.get())));
  if (H5Pget_nfilters(dcpl.get()) != 0 || !stored_as(d.get(), dtype)) return {};
  int64_t k = 0;
  const std::vector<PackedUnit> chunks = row_chunks(d.get(), dcpl.get(), dims, row_bytes, &k);
  if (chunks.empty()) return {};
  for (const PackedUnit& c : chunks)
    if (c.bytes != k * row_bytes) return {};  // not stored whole
  const auto row_at = [&](int64_t r) { return chunks[static_cast<size_t>(r / k)].offset + (r % k) * row_bytes; };
  for (int64_t u = 0; u < units; ++u) {
    const int64_t first = u * rows_per_unit;
    for (int64_t r = first + 1; r < first + rows_per_unit; ++r)
      if (row_at(r) != row_at(r - 1) + row_bytes) return {};  // the unit's chunks are not back to back
    if (row_at(first) % elem != 0) return {};  // read in place: aligned to the element (see contiguous_offset)
    offsets[static_cast<size_t>(u)] = row_at(first);
  }
  return offsets;
}

PackedUnits H5File::packed_units(const std::string& dataset, DType dtype, int64_t rows_per_unit,
                                 int64_t max_shared_chunk_bytes) const {
  const auto dims = unit_dims(dataset, rows_per_unit, "packed_units");
  if (dims.empty()) return {};
  const Storage st = storage(dataset);
  const size_t rank = dims.size();
  const bool unfiltered = st.filters.empty();
  if (st.chunk.size() != rank || !(unfiltered || deflate_pipeline(st.filters)) || !stored_as(dataset, dtype)) return {};
  H5DatasetId d = open_dataset(dataset);
  if (!unfiltered) {
    // Partial edge chunks stored unfiltered while their filter mask says
    // nothing: HDF5 decides by the layout's option; not decoded here.
    H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d.get())));
    unsigned opts = 0;
    if (H5Pget_chunk_opts(dcpl.get(), &opts) < 0 || (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)) {
      H5Eclear2(H5E_DEFAULT);
      return {};
    }
  }
  PackedUnits p;
  p.shuffle = st.filters.size() == 2;
  p.chunk_shape = st.chunk;
  p.unit_shape = dims;
  p.unit_shape[0] = rows_per_unit;
  // A chunk holds rows of one unit (one unit: LBANN's `full`), or the rows
  // of whole units, which then share it; and there are few enough chunks
  // to locate (a lookup each, each walking HDF5's index).
  const ChunkCount n = count_chunks(dims, st.chunk, rows_per_unit, static_cast<int64_t>(dtype_size(dtype)));
  if (!n.worth_locating(!unfiltered)) return {};
  p.units_per_chunk = n.rows.units_per_chunk;
  p.per_unit = static_cast<int64_t>(n.per_unit);
  const int64_t chunk_bytes = static_cast<int64_t>(n.chunk_bytes);  // stored so where unfiltered (edge chunks whole)
  std::vector<int64_t> count(rank);  // chunks per unit along each axis
  for (size_t i = 0; i < rank; ++i) count[i] = (p.unit_shape[i] + p.chunk_shape[i] - 1) / p.chunk_shape[i];
  // Chunks of whole units are listed once, for the first of their units
  // (MappedShard::sample finds them for the others).
  const int64_t units = dims[0] / rows_per_unit, groups = (units + p.units_per_chunk - 1) / p.units_per_chunk;
  if (p.units_per_chunk > 1 && !unfiltered && chunk_bytes > max_shared_chunk_bytes)
    return {};  // (unfiltered: read in place)
  // Each chunk's place by its coordinates (H5Dget_chunk_info, by
  // position, would walk the index from the start as well).
  std::vector<int64_t> at(count.size());  // zeros
  std::vector<hsize_t> coord(rank);
  p.units.reserve(static_cast<size_t>(groups * p.per_unit));
  for (int64_t u = 0; u < units; u += p.units_per_chunk) {
    for (int64_t k = 0; k < p.per_unit; ++k) {
      for (size_t i = 0; i < rank; ++i) coord[i] = static_cast<hsize_t>(at[i] * p.chunk_shape[i]);
      coord[0] += static_cast<hsize_t>(u * rows_per_unit);
      std::optional<PackedUnit> c = chunk_at(d.get(), coord.data());
      if (!c) return {};
      // Unfiltered chunks are stored whole (HDF5 1.10's index gives that size
      // whatever was written): another is a damaged index, left to HDF5.
      if (unfiltered && c->bytes != chunk_bytes) return {};
      if (unfiltered) c->skipped = kNoFilterApplied;
      p.units.push_back(*c);
      next_in_grid(at, count);  // the unit's next chunk
    }
  }
  if (p.chunk_shape == p.unit_shape) {  // the unit is its chunk (an extendible dataset's may be larger)
    p.unit_shape.clear();
    p.chunk_shape.clear();
  }
  return p;
}

PackedUnit H5File::chunk_place(const std::string& dataset, const std::vector<int64_t>& coord) const {
  H5DatasetId d = open_dataset(dataset);
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d.get())));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED || coord.size() != shape(dataset).size()) return {};
  const std::vector<hsize_t> c(coord.begin(), coord.end());
  return chunk_at(d.get(), c.data()).value_or(PackedUnit{});
}

bool H5File::deflate_pipeline(const std::vector<Filter>& f) {
  // In the order the writer applied them: [shuffle,] deflate.
  return (f.size() == 1 || f.size() == 2) && f.back().id == H5Z_FILTER_DEFLATE &&
         (f.size() == 1 || f.front().id == H5Z_FILTER_SHUFFLE);
}

bool H5File::stored_as(const std::string& dataset, DType dtype) const {
  H5DatasetId d = open_dataset(dataset);
  return stored_as(d.get(), dtype);
}

H5File::Storage H5File::storage(const std::string& dataset) const {
  H5DatasetId d = open_dataset(dataset);
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d.get())));
  Storage s;
  if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    const int rank = static_cast<int>(shape(dataset).size());
    std::vector<hsize_t> chunk(static_cast<size_t>(rank));
    if (rank > 0 && H5Pget_chunk(dcpl.get(), rank, chunk.data()) == rank) s.chunk.assign(chunk.begin(), chunk.end());
  }
  const int nf = MRMF_H5_CHECK(H5Pget_nfilters(dcpl.get()));  // a failed query must not read as "unfiltered"
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    char name[64] = {};
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, sizeof(name), name, &config);
    s.filters.push_back({static_cast<int>(id), *name ? std::string(name) : "filter " + std::to_string(id)});
  }
  return s;
}

std::optional<H5File::Filter> H5File::undecodable_filter(const std::string& dataset) const {
  for (const Filter& f : storage(dataset).filters) {
    const htri_t avail = H5Zfilter_avail(static_cast<H5Z_filter_t>(f.id));  // loads a plugin where one is found
    if (avail <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace mrmf::data
