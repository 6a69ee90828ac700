// Small RAII layer over the HDF5 C API (serial, 1.10+).
//
// Why our own wrappers: the C++ HDF5 bindings are not always installed next to
// the C library on clusters, and the C API with move-only handles is all the
// data layer needs. Every failure becomes an mrmf::Error of kind Data that
// names the file and dataset; HDF5's own error printing is silenced so that
// our exception is the one message the user sees.
//
// Many ranks reading one file: HDF5 >= 1.10 locks files on open, which fails
// (or serialises) on parallel file systems without flock support. Read-only
// opens here disable that lock through H5Pset_file_locking where the library
// has it (1.10.7+, 1.12.1+); on older libraries export
// HDF5_USE_FILE_LOCKING=FALSE before launching the ranks.
//
// Thread safety: the serial HDF5 library is not thread-safe. Use one H5File
// per thread and never call into HDF5 from two threads at once (loaders do
// the I/O from one thread, or hold a mutex).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/check_hdf5.h"
#include "core/tensor.h"

namespace mrmf::data {

// Called by every entry point: turns off HDF5's automatic error printing
// (once per thread: a thread-safe HDF5 build keeps that setting per thread,
// and the loaders read from their own I/O thread).
void hdf5_quiet();

// True once an H5Fclose has failed in this process (a full disk, a quota).
// HDF5 1.10 keeps such a file registered and crashes closing it again at
// exit (HDFGroup/hdf5#2257), so main() then leaves through _Exit.
bool hdf5_close_failed();
void note_hdf5_close_failure() noexcept;

// A move-only owner of one HDF5 id; `Close` is H5Fclose, H5Dclose, ...
// Closing never throws (a failure is logged).
template <herr_t (*Close)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  ~H5Handle() { reset(); }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void reset() noexcept {
    if (id_ >= 0 && Close(id_) < 0) {
      ::mrmf::detail::warn_error("HDF5", "H5?close", ::mrmf::detail::hdf5_error_text(), __FILE__, __LINE__);
      // (Compared at run time: with -fsanitize, GCC 12 does not take the
      // addresses of two functions as a constant expression.)
      if (Close == &H5Fclose) note_hdf5_close_failure();
    }
    id_ = H5I_INVALID_HID;
  }
  // Gives up ownership without closing.
  hid_t release() noexcept { return std::exchange(id_, H5I_INVALID_HID); }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using H5FileId = H5Handle<H5Fclose>;
using H5DatasetId = H5Handle<H5Dclose>;
using H5SpaceId = H5Handle<H5Sclose>;
using H5TypeId = H5Handle<H5Tclose>;
using H5PlistId = H5Handle<H5Pclose>;
using H5AttrId = H5Handle<H5Aclose>;

// The name HDF5 holds for the file that object `id` lives in (a dataset
// behind an external link: the link's target); empty where it has none.
std::string h5_file_name(hid_t id);

// The HDF5 element types mrmf reads and writes. Float16 is not a predefined
// HDF5 type in 1.10: it is recognised as the IEEE binary16 layout (either
// byte order) and created as it, little-endian (the same type h5py writes
// for numpy.float16); other floats of up to 4 bytes (bfloat16) read as
// float32.
hid_t h5_native_type(DType dtype);  // borrowed id (float16: a library-owned copy, do not close)
bool is_supported_h5_dtype(DType dtype);

// A chunk of a unit of rows (H5File::packed_units).
struct PackedUnit {
  int64_t offset = 0;    // of the chunk in the file
  int64_t bytes = 0;     // its stored (maybe compressed) size
  // HDF5's filter mask: bit i set = filter i of the pipeline was not
  // applied (kNoFilterApplied for an unfiltered dataset's chunks).
  uint32_t skipped = 0;
};
struct PackedUnits {
  // Each unit's chunks, per_unit of them per unit in row-major order of
  // their place in it (one: the unit is its chunk), listed once for each
  // run of units_per_chunk units that share them; empty: not stored so.
  std::vector<PackedUnit> units;
  // The pipeline: shuffle (filter 0) before deflate, or deflate alone, or
  // none -- an unfiltered dataset, whose chunks' masks are then recorded as
  // kNoFilterApplied (data/packed_chunks.h).
  bool shuffle = false;
  int64_t per_unit = 1;
  // Where the unit is not its chunk (per_unit > 1 or units_per_chunk > 1;
  // data/packed_chunks.h, ChunkGrid).
  std::vector<int64_t> unit_shape, chunk_shape;
  // Units whose rows share each chunk along axis 0 (> 1: chunks of several
  // samples, as h5py's automatic chunking makes them); unit u's chunks are
  // units[(u / units_per_chunk) * per_unit ...] and its rows start
  // (u % units_per_chunk) * rows_per_unit rows into them. (Listed once, not
  // per unit: h5py's chunks of 128 cubes of 128^3 hold 16 cubes each.)
  int64_t units_per_chunk = 1;
};

struct WriteOptions {
  int64_t chunk_rows = 0;  // > 0: chunked layout with this many rows per chunk
  int deflate = 0;         // 1..9: gzip level (requires a chunked layout); 0 = off
  bool shuffle = false;    // the shuffle filter before deflate (h5py's shuffle=True; requires a chunked layout)
  // The whole chunk shape, one entry per axis (h5py's chunks=), instead of
  // chunk_rows' rows spanning the other axes (not both).
  std::vector<int64_t> chunk = {};  // (an initializer: no -Wmissing-field-initializers for WriteOptions{k, z})
  // HDF5's Fletcher-32 filter: a checksum per chunk, checked by every read
  // (a mismatch fails the read). Without a chunk shape: one chunk, or rows
  // of up to 1 GiB; none for a scalar or empty dataset (nothing to check).
  bool checksum = false;
};

// The most specific message on HDF5's error stack (e.g. "truncated file:
// eof = ..." rather than the API-level "unable to open file"), which it
// clears; where HDF5 reports a checksum mismatch, says the file is damaged
// (detail::hdf5_error_text).
std::string innermost_error();

class H5File {
 public:
  // Read-only open. A missing, non-HDF5, corrupt or truncated file is an
  // Error of kind Data whose message names the path.
  static H5File open_read(const std::string& path);
  // Creates (truncates) a file for writing. `checksummed`: the file format
  // of HDF5 1.10 (readable by 1.10 and later, h5py included), whose
  // superblock, object headers (attributes, compact datasets) and chunk
  // indexes carry checksums that every read verifies -- with
  // WriteOptions::checksum on the other datasets, a changed byte is an
  // error.
  static H5File create(const std::string& path, bool checksummed = false);

  H5File() = default;
  H5File(H5File&&) noexcept = default;
  H5File& operator=(H5File&&) noexcept = default;

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }
  // Flushes and closes, and throws (naming the file) if either fails: a
  // writer must know its file is whole before it commits it under the final
  // name (the destructor closes too, but can only log a failure).
  void close();

  bool exists(const std::string& dataset) const;
  // Dimensions of a dataset (any rank; scalar -> empty). Missing -> Data error.
  std::vector<int64_t> shape(const std::string& dataset) const;
  // Element type as an mrmf DType; an unsupported type is a Data error naming it.
  DType dtype(const std::string& dataset) const;
  // Whether `dataset` holds IEEE binary16, 32 or 64 floats (either byte
  // order): a damaged type message (another exponent bias, size or layout)
  // was converted by HDF5 into other numbers without an error.
  bool ieee_float(const std::string& dataset) const;
  // A human name of the stored type ("uint8", "float64", "string", ...), for messages.
  std::string type_name(const std::string& dataset) const;

  // Whole dataset (at most 5 dimensions) in its stored dtype, or converted
  // by HDF5 to `as` (labels are float16, float32 or float64 on disk; the
  // engine reads them as float32).
  Tensor read(const std::string& dataset, std::optional<DType> as = std::nullopt) const;
  // Rows [start, start+count) along the first axis, likewise.
  Tensor read_rows(const std::string& dataset, int64_t start, int64_t count,
                   std::optional<DType> as = std::nullopt) const;
  // Same into caller memory (e.g. a pinned buffer) holding `count` rows of `dtype`;
  // HDF5 converts between integer/float types where they differ from the file's.
  void read_rows_into(const std::string& dataset, int64_t start, int64_t count, DType dtype, void* dst) const;
  // Where a dataset's elements lie in the file, for reading them without
  // HDF5 (data/mapped_file.h): the byte offset when the dataset is stored
  // contiguously, unfiltered, allocated, as exactly `dtype`'s little-endian
  // file type, at an offset aligned to the element size, in a file without a
  // user block; -1 otherwise.
  int64_t contiguous_offset(const std::string& dataset, DType dtype) const;
  // The same for a dataset read in units of `rows_per_unit` rows along its
  // first axis (a CosmoFlow sample: one row of `3Dmap`, LBANN's four of
  // `full`): each unit's byte offset, when every unit lies in the file as
  // one unbroken run of `dtype`'s elements -- a contiguous dataset as above,
  // or a chunked, unfiltered one whose chunks span all but the first axis,
  // every one allocated, each unit inside one chunk or in chunks stored back
  // to back (the same type, alignment and user-block conditions); empty
  // otherwise, and when the row count is not a multiple of rows_per_unit.
  // Why: h5py and other writers often chunk a sample per chunk; such files
  // then map like contiguous ones (data/mapped_shard.cpp).
  std::vector<int64_t> unit_offsets(const std::string& dataset, DType dtype, int64_t rows_per_unit) const;
  // For a chunked dataset -- unfiltered, or filtered by deflate alone or by
  // shuffle then deflate (h5py's compression="gzip", with or without
  // shuffle=True), as exactly `dtype`'s little-endian file type, in a file
  // without a user block -- where a chunk holds rows of one unit (its row
  // count divides rows_per_unit, or the dataset is one unit) or the rows of
  // whole units (rows_per_unit divides its row count:
  // PackedUnits::units_per_chunk), its chunks are few enough to locate
  // (chunks_worth_locating in data/packed_chunks.h: HDF5 1.10 walks its
  // index for each, so their cost grows as their count squared; at most
  // kMaxLocatedChunks; count_chunks), every chunk is allocated, and partial edge
  // chunks are filtered too (HDF5's default; unfiltered: every chunk stored whole): where each
  // unit's chunks lie and which filters each skipped, for decoding them (or,
  // unfiltered, putting them together) without HDF5 on any thread
  // (data/packed_chunks.h). Empty units otherwise. Why: serial HDF5 inflates
  // and gathers on the one thread that calls it; h5py writes a sample per
  // chunk given chunks=(1, D, H, W, 4), chunks of several samples given
  // compression="gzip" alone (its automatic chunk shape), and other writers
  // split a sample by channel or into sub-cubes (unfiltered too:
  // unit_offsets() takes only samples that are one run of bytes).
  // Compressed chunks of whole units larger than this (decoded) are refused:
  // each read of a unit inflates its whole chunk into a buffer of the
  // reading thread's.
  static constexpr int64_t kMaxSharedChunkBytes = int64_t{64} << 20;
  PackedUnits packed_units(const std::string& dataset, DType dtype, int64_t rows_per_unit,
                           int64_t max_shared_chunk_bytes = kMaxSharedChunkBytes) const;
  // Where the chunk of a chunked dataset whose first element is at `coord`
  // lies: its file offset, stored bytes and filter mask; bytes 0 where it
  // is not allocated or the dataset is not chunked. (One lookup: see
  // chunks_worth_locating in data/packed_chunks.h for what that costs.)
  PackedUnit chunk_place(const std::string& dataset, const std::vector<int64_t>& coord) const;
  // How a dataset is stored: its chunk shape (empty where it is not
  // chunked) and its filters in pipeline order. For telling a user why the
  // loaders read a file as they do (data/mapped_shard.cpp).
  struct Filter {
    int id;            // H5Z_filter_t
    std::string name;  // as the file names it ("deflate", "shuffle", ...)
  };
  struct Storage {
    std::vector<int64_t> chunk;
    std::vector<Filter> filters;
  };
  Storage storage(const std::string& dataset) const;
  // The first of `dataset`'s filters that this HDF5 cannot decode (no such
  // filter built in, none found as a plugin); none where all can be. Also
  // "optional" ones: chunks that filter could encode when written need it.
  std::optional<Filter> undecodable_filter(const std::string& dataset) const;
  // Why some of `dataset`'s values would read as HDF5's fill value, or
  // fail, instead of as stored data; none where every element is stored.
  // HDF5 reads storage that was never written -- a dataset created and never
  // filled, chunks never written (a writer that died), a virtual dataset's
  // missing source file or unmapped region, an external raw file shorter
  // than the dataset -- as the fill value (zeros) without an error, so a
  // loader trained on zeros (data/h5file_storage.cpp).
  std::optional<std::string> unstored_part(const std::string& dataset) const;
  // The other files whose bytes this file's datasets read: external links'
  // targets (and what their datasets read), virtual datasets' source files,
  // external raw files; as absolute paths of files that exist. For refusing
  // an output that would overwrite an input reached that way.
  std::vector<std::string> files_behind() const;
  // Whether `filters` are what packed_units() decodes: deflate alone, or
  // shuffle then deflate.
  static bool deflate_pipeline(const std::vector<Filter>& filters);
  // Whether `dataset` lies in this file (not behind an external link) and
  // holds exactly `dtype`'s little-endian file type in a file without a
  // user block: the conditions of reading it without HDF5 that its layout
  // and filters do not decide.
  bool stored_as(const std::string& dataset, DType dtype) const;

  // Creates a group (its parent must exist); in a checksummed file, one
  // whose links and attributes stay in its checksummed header.
  void create_group(const std::string& group);
  // Creates a dataset of `shape` and `dtype` (contents written later with write_rows).
  void create_dataset(const std::string& dataset, const std::vector<int64_t>& shape, DType dtype,
                      const WriteOptions& opts = {});
  // Writes a contiguous CPU tensor whose dtype matches the dataset at rows [start, start + t.size(0)).
  void write_rows(const std::string& dataset, int64_t start, const Tensor& t);
  // create_dataset + write_rows of the whole tensor.
  void write(const std::string& dataset, const Tensor& t, const WriteOptions& opts = {});

  // Scalar string datasets (h5py writes `meta.JSON` as a variable-length string;
  // fixed-length strings are read too) and string attributes on the file root
  // or on a dataset.
  std::string read_string(const std::string& dataset) const;
  // Written as fixed-length strings (see utf8_type in h5file.cpp: a damaged
  // variable-length string's heap entry crashes libhdf5 1.10's reader);
  // variable_length for files whose layout has them (meta.JSON, as h5py
  // writes it).
  void write_string(const std::string& dataset, const std::string& value, bool variable_length = false);
  std::optional<std::string> read_string_attribute(const std::string& object, const std::string& name) const;
  // Whether `object` has attribute `name`; false where `object` does not
  // exist; a Data error where its header fails its checksum (damage is not
  // absence).
  bool has_attribute(const std::string& object, const std::string& name) const;
  // The attribute in which write_string keeps a long fixed-length text's
  // FNV-1a hash (hex), checked by read_string.
  static constexpr const char* kTextChecksum = "mrmf_fnv1a64";
  void write_string_attribute(const std::string& object, const std::string& name, const std::string& value);

 private:
  H5DatasetId open_dataset(const std::string& dataset) const;
  // stored_as() for an open dataset `d` (filters and layout are the caller's).
  bool stored_as(hid_t d, DType dtype) const;
  // `dataset`'s dimensions when its first is a multiple of rows_per_unit
  // (> 0, else an error naming `who`); empty otherwise.
  std::vector<int64_t> unit_dims(const std::string& dataset, int64_t rows_per_unit, const char* who) const;
  // Refuses a chunk of rows [start, start + count) of dataset `d` that
  // went through no size-changing filter (none in the pipeline, or its
  // mask says it skipped them) while it is stored in fewer bytes than it
  // stands for: libhdf5 1.10 copies it whole out of its stored bytes,
  // past their end (session 61's fuzzing: garbage read, or SIGSEGV). Not needed where open_read walked the
  // dataset's chunk index (sound_chunk_indexes_); else a lookup per chunk
  // the rows lie in, each ~8 ns x the dataset's chunks in HDF5 1.10, up to
  // a bound on that work (data/h5file_chunks.cpp).
  void check_skipped_filters(hid_t d, const std::string& dataset, const std::vector<int64_t>& dims, int64_t start,
                             int64_t count) const;
  // The file addresses of a chunked dataset's chunks, when every chunk spans
  // all but the first axis and is allocated: chunk c holds rows [c k, c k + k)
  // (k = *rows_per_chunk); empty otherwise (data/h5file_chunks.cpp).
  std::vector<PackedUnit> row_chunks(hid_t d, hid_t dcpl, const std::vector<int64_t>& dims, int64_t row_bytes,
                                     int64_t* rows_per_chunk) const;
  std::string path_;
  H5FileId file_;
  // Chunked datasets whose chunk index open_read's walk found sound
  // (data/h5_symbol_table_check.h): check_skipped_filters has nothing to add.
  std::unordered_set<std::string> sound_chunk_indexes_;
  // Files behind external links that lookups walked before libhdf5 opened
  // them (data/h5_link_access.h): walked once.
  mutable std::unordered_set<std::string> walked_link_targets_;
  bool checksummed_ = false;  // create(path, true): groups keep their links and attributes compact
  static void keep_links_and_attributes_compact(hid_t ocpl);
};

// H5File::files_behind() of `path` where it is an HDF5 file; empty for
// any other path (a folder, a YAML file, a file HDF5 cannot open). For
// checking an output against every file an input reads.
std::vector<std::string> files_behind(const std::string& path);

// A file written under a temporary name and renamed into place on commit(),
// so that readers never see a half-written file and an interrupted run leaves
// no file under the final name. The temporary is removed if never committed.
class AtomicOutput {
 public:
  explicit AtomicOutput(std::string final_path);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  const std::string& temp_path() const { return temp_; }
  const std::string& final_path() const { return final_; }
  void commit();  // rename(temp, final), replacing an existing file

 private:
  std::string final_, temp_;
  bool committed_ = false;
};

// A text file (report, JSON state) written through an AtomicOutput: a reader,
// or a process killed while writing, never sees half of it.
void write_text_atomically(const std::string& path, const std::string& text);

// IEEE binary16 <-> float32 (round to nearest even), done by hand because
// float16 is a storage type only and HDF5 1.10 has no native half type.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
// Converts an F32/F16/U16/I16 CPU tensor to a new contiguous float32 tensor.
Tensor to_float32(const Tensor& t);
// Converts a float32 CPU tensor to `dtype` (F32, F16; integer types round to
// nearest even and clamp to their range; a NaN for an integer type is a
// Data error). These conversions: data/dtype_convert.cpp.
Tensor from_float32(const Tensor& t, DType dtype);

std::string shape_str(const std::vector<int64_t>& dims);  // "(16, 1600, 3)"

}  // namespace mrmf::data
