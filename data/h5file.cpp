#include "data/h5file.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/hash.h"
#include "core/log.h"
#include "data/h5_global_heap_check.h"
#include "data/h5_link_access.h"
#include "data/h5_symbol_table_check.h"
#include "data/hdf5_crash_note.h"

namespace fs = std::filesystem;

namespace mrmf::data {

void hdf5_quiet() {
  thread_local bool quiet = false;
  if (!quiet) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  quiet = true;
}

namespace {
std::atomic<bool> g_close_failed{false};
}
bool hdf5_close_failed() { return g_close_failed.load(); }
void note_hdf5_close_failure() noexcept { g_close_failed.store(true); }

std::string shape_str(const std::vector<int64_t>& dims) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  if (dims.size() == 1) os << ",";
  os << ")";
  return os.str();
}

namespace {

// IEEE binary16, little-endian: the layout numpy.float16 / h5py uses, so files
// written here read back as float16 in Python.
hid_t half_type() {
  static const hid_t t = [] {
    hdf5_quiet();
    hid_t h = MRMF_H5_CHECK(H5Tcopy(H5T_IEEE_F32LE));
    MRMF_H5_CHECK(H5Tset_fields(h, 15, 10, 5, 0, 10));
    MRMF_H5_CHECK(H5Tset_size(h, 2));
    MRMF_H5_CHECK(H5Tset_ebias(h, 15));
    return h;
  }();
  return t;
}

// Explicit little-endian file types, so a file written on any host reads the same.
hid_t file_type(DType d) {
  switch (d) {
    case DType::F32: return H5T_IEEE_F32LE;
    case DType::F64: return H5T_IEEE_F64LE;
    case DType::F16: return half_type();
    case DType::U16: return H5T_STD_U16LE;
    case DType::I16: return H5T_STD_I16LE;
    case DType::I32: return H5T_STD_I32LE;
    case DType::I64: return H5T_STD_I64LE;
    case DType::U8: return H5T_STD_U8LE;
    default: MRMF_THROW(Data, "HDF5 storage of ", dtype_name(d), " is not supported");
  }
}

// Empty when a number type's bit fields lie inside its bytes, else what
// does not fit. Only a damaged header says otherwise ("16-bit unsigned
// integer, 239-bit precision"), and HDF5's conversion of such a type
// overran its stack (found by fuzzing: a crash, not an error).
std::string number_type_misfit(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) return {};
  const size_t bits = H5Tget_size(type) * 8, precision = H5Tget_precision(type);
  const int offset = H5Tget_offset(type);
  if (bits == 0 || precision == 0 || offset < 0 || precision + static_cast<size_t>(offset) > bits) {
    H5Eclear2(H5E_DEFAULT);
    return detail::concat(precision, "-bit precision at bit offset ", offset, " in a ", bits, "-bit type");
  }
  if (cls == H5T_FLOAT) {
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0 || esize == 0 || msize == 0 || spos >= bits ||
        epos + esize > bits || mpos + msize > bits) {
      H5Eclear2(H5E_DEFAULT);
      return detail::concat("float fields (sign bit ", spos, ", exponent ", esize, " bits at ", epos, ", mantissa ",
                            msize, " bits at ", mpos, ") outside a ", bits, "-bit type");
    }
  }
  return {};
}

void require_intact_number_type(hid_t type, const std::string& path, const std::string& dataset) {
  const std::string misfit = number_type_misfit(type);
  MRMF_CHECK_KIND(Data, misfit.empty(), path, ": dataset '", dataset, "' has a damaged element type (", misfit,
                  "): is the file damaged?");
}

// A compact dataset keeps its values in its object header, and libhdf5
// 1.10 copies as many bytes as the shape and type need from a buffer of the
// size its layout message records, without comparing the two: a layout
// message damaged into "compact, 0 bytes" (session 61's fuzzing: eight zero
// bytes over a contiguous dataset's layout class and address) made every
// read die of SIGSEGV (the numbers' and `meta.JSON`'s alike).
void require_consistent_compact(hid_t d, const std::string& path, const std::string& dataset) {
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d)));
  if (H5Pget_layout(dcpl.get()) != H5D_COMPACT) return;
  H5TypeId type(MRMF_H5_CHECK(H5Dget_type(d)));
  H5SpaceId space(MRMF_H5_CHECK(H5Dget_space(d)));
  const H5T_class_t cls = H5Tget_class(type.get());
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  size_t element = 0;  // bytes per element in the file
  if (cls == H5T_INTEGER || cls == H5T_FLOAT || (cls == H5T_STRING && H5Tis_variable_str(type.get()) == 0)) {
    element = H5Tget_size(type.get());
  } else if (cls == H5T_STRING) {
    // In the file: the length (4 bytes), the global heap collection's
    // address and the object's index (4) -- not the memory size H5Tget_size gives.
    const H5FileId file(MRMF_H5_CHECK(H5Iget_file_id(d)));
    H5PlistId fcpl(MRMF_H5_CHECK(H5Fget_create_plist(file.get())));
    size_t sizeof_addr = 0, sizeof_size = 0;
    MRMF_H5_CHECK(H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size));
    element = 4 + sizeof_addr + 4;
  }
  if (element == 0 || n < 0) return;  // other types: not read by mrmf
  const hsize_t need = static_cast<hsize_t>(n) * element, stored = H5Dget_storage_size(d);
  MRMF_CHECK_KIND(Data, stored == need, path, ": dataset '", dataset, "' is stored compact in ", stored,
                  " bytes where its shape and element type need ", need, ": is the file damaged?");
}

// The DType of an HDF5 type, or nullopt when mrmf has no equivalent.
std::optional<DType> dtype_of_h5(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (!number_type_misfit(type).empty()) return std::nullopt;
  if (cls == H5T_FLOAT) {
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) {
      H5Eclear2(H5E_DEFAULT);
      return std::nullopt;
    }
    // IEEE binary16 (either byte order) is float16; no native half in 1.10.
    // Another float of 4 bytes or fewer whose exponent and mantissa fit
    // float32's (bfloat16: 8 and 7 bits) is read as float32, which HDF5
    // converts to exactly: read as float16, bfloat16 lost range and digits.
    if (size == 2 && esize == 5 && msize == 10 && H5Tget_ebias(type) == 15) return DType::F16;
    if (size <= 4 && esize <= 8 && msize <= 23) return DType::F32;
    if (size == 8) return DType::F64;
  } else if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (size == 1 && !is_signed) return DType::U8;
    if (size == 2) return is_signed ? DType::I16 : DType::U16;
    if (size == 4 && is_signed) return DType::I32;
    if (size == 8 && is_signed) return DType::I64;
  }
  return std::nullopt;
}

std::string h5_type_name(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t bits = H5Tget_size(type) * 8;
  const std::string misfit = number_type_misfit(type);
  const std::string damaged = misfit.empty() ? "" : " with " + misfit + " (damaged)";
  switch (cls) {
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_2 ? "int" : "uint") + std::to_string(bits) + damaged;
    case H5T_FLOAT: return "float" + std::to_string(bits) + damaged;
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_ENUM: return "enum";
    default: return "HDF5 class " + std::to_string(static_cast<int>(cls));
  }
}

// `where` ("file: dataset 'x'") names it in the error.
std::vector<int64_t> space_dims(hid_t space, const std::string& where) {
  const int rank = MRMF_H5_CHECK(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> d(static_cast<size_t>(rank));
  if (rank > 0) MRMF_H5_CHECK(H5Sget_simple_extent_dims(space, d.data(), nullptr));
  // A damaged header can claim any extent: keep every count (elements of 8
  // bytes) addressable, so that no size computed from it wraps.
  uint64_t elems = 8;
  for (hsize_t x : d)
    MRMF_CHECK_KIND(
        Data, x <= (uint64_t{1} << 62) && !__builtin_mul_overflow(elems, x, &elems) && elems < (uint64_t{1} << 62),
        where, " has extent (",
        [&] {
          std::string s;
          for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
          return s;
        }(),
        "), too large to address: is the file damaged?");
  return {d.begin(), d.end()};
}

// Reads one string from a dataset or attribute (`is_attr`) whose type is a string.
std::string read_one_string(hid_t obj, bool is_attr, const std::string& where) {
  H5TypeId type(MRMF_H5_CHECK(is_attr ? H5Aget_type(obj) : H5Dget_type(obj)));
  H5SpaceId space(MRMF_H5_CHECK(is_attr ? H5Aget_space(obj) : H5Dget_space(obj)));
  MRMF_CHECK_KIND(Data, H5Tget_class(type.get()) == H5T_STRING, where, " has type ", h5_type_name(type.get()),
                  ", expected a string");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  MRMF_CHECK_KIND(Data, n == 1, where, " holds ", n, " strings, expected one");
  H5TypeId mem(MRMF_H5_CHECK(H5Tcopy(H5T_C_S1)));
  MRMF_H5_CHECK(H5Tset_cset(mem.get(), H5Tget_cset(type.get())));
  if (H5Tis_variable_str(type.get()) > 0) {
    check_vlen_string_type(type.get(), where);
    MRMF_H5_CHECK(H5Tset_size(mem.get(), H5T_VARIABLE));
    char* buf = nullptr;
    const herr_t read =
        is_attr ? H5Aread(obj, mem.get(), &buf) : H5Dread(obj, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &buf);
    MRMF_CHECK_KIND(Data, read >= 0, where, ": reading the string failed (", innermost_error(),
                    "): is the file damaged?");
    std::string s = buf ? buf : "";
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, &buf);
#else
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, &buf);
#endif
    return s;
  }
  const size_t size = H5Tget_size(type.get());
  MRMF_H5_CHECK(H5Tset_size(mem.get(), size));
  std::string s(size, '\0');
  const herr_t read =
      is_attr ? H5Aread(obj, mem.get(), s.data()) : H5Dread(obj, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data());
  MRMF_CHECK_KIND(Data, read >= 0, where, ": reading the string failed (", innermost_error(),
                  "): is the file damaged?");
  s.resize(std::strlen(s.c_str()));  // fixed-length strings are NUL- or space-padded
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// A UTF-8 string type: variable-length (its bytes in the file's global
// heap) or fixed at `value`'s length plus its NUL. libhdf5 1.10 trusts a
// global heap object's stored length and copies that many bytes: one
// damaged byte there crashed `mrmf eval` (a helper's fuzzing). Setting every
// byte of a small test file's heap to every other value crashed a plain C
// reader in 23 % of the files; fixed-length strings lie in the attribute or
// dataset itself, and the same sweep over the first 1500 bytes of such a
// file crashed it in 4 of 382500.
H5TypeId utf8_type(bool variable_length, const std::string& value) {
  H5TypeId t(MRMF_H5_CHECK(H5Tcopy(H5T_C_S1)));
  MRMF_H5_CHECK(H5Tset_size(t.get(), variable_length ? H5T_VARIABLE : value.size() + 1));
  MRMF_H5_CHECK(H5Tset_strpad(t.get(), H5T_STR_NULLTERM));
  MRMF_H5_CHECK(H5Tset_cset(t.get(), H5T_CSET_UTF8));
  return t;
}

// A long text's FNV-1a hash in hex: the kTextChecksum attribute's value.
std::string text_digest(const std::string& text) {
  std::ostringstream h;
  h << std::hex << fnv1a64(text);
  return h.str();
}

}  // namespace

std::string innermost_error() { return detail::hdf5_error_text(); }

hid_t h5_native_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return H5T_NATIVE_FLOAT;
    case DType::F64: return H5T_NATIVE_DOUBLE;
    case DType::F16: return half_type();  // little-endian hosts only (x86, ARM)
    case DType::U16: return H5T_NATIVE_UINT16;
    case DType::I16: return H5T_NATIVE_INT16;
    case DType::I32: return H5T_NATIVE_INT32;
    case DType::I64: return H5T_NATIVE_INT64;
    case DType::U8: return H5T_NATIVE_UINT8;
    default: MRMF_THROW(Data, "HDF5 I/O of ", dtype_name(dtype), " is not supported");
  }
}

bool is_supported_h5_dtype(DType dtype) { return dtype != DType::BF16; }

// ------------------------------------------------------------------ H5File
H5File H5File::open_read(const std::string& path) {
  hdf5_quiet();
  std::error_code ec;
  MRMF_CHECK_KIND(Data, fs::exists(path, ec), path, ": no such file (expected an HDF5 file)");
  MRMF_CHECK_KIND(Data, !fs::is_directory(path, ec), path, ": is a directory, expected an HDF5 file");
  // A FIFO blocked H5Fis_hdf5's open until a writer came: a hang.
  MRMF_CHECK_KIND(Data, fs::is_regular_file(path, ec) || fs::is_character_file(path, ec), path,
                  ": is not a regular file (a FIFO, socket or block device), expected an HDF5 file");
  note_hdf5_file_opened(path);  // before libhdf5 reads it: a damaged superblock can crash it already
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  MRMF_CHECK_KIND(Data, is_h5 != 0, path, ": not an HDF5 file (no HDF5 signature: corrupt, truncated or another format)");
  // Before libhdf5 follows addresses it does not check.
  std::unordered_set<std::string> sound_chunk_indexes = check_symbol_table_structure(path);
  H5PlistId fapl(MRMF_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
#if H5_VERSION_GE(1, 12, 1) || (H5_VERSION_GE(1, 10, 7) && !H5_VERSION_GE(1, 11, 0))
  // Readers never need the lock, and it fails on file systems without flock.
  MRMF_H5_CHECK(H5Pset_file_locking(fapl.get(), false, true));
#endif
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) {
    const std::string why = innermost_error();
    MRMF_THROW(Data, path, ": cannot open as HDF5 (", why, "); the file may be truncated or corrupt");
  }
  H5File f;
  f.path_ = path;
  f.file_ = H5FileId(id);
  f.sound_chunk_indexes_ = std::move(sound_chunk_indexes);
  return f;
}

H5File H5File::create(const std::string& path, bool checksummed) {
  hdf5_quiet();
  H5PlistId fapl(MRMF_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  // The default (earliest) format has no metadata checksums: a damaged
  // attribute reads as another value or crashes the library. Not 1.8's
  // format: it indexes chunks with version-1 B-trees, which have no
  // checksum, so a damaged index byte hid a chunk and its weights read as
  // the fill value (zeros) with no error (session 58's review: 22 of a
  // file's bytes). 1.10's single-chunk and fixed-array indexes have one.
#if H5_VERSION_GE(1, 10, 2)
  if (checksummed) MRMF_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110));
#else
  if (checksummed) MRMF_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST));
#endif
  H5PlistId fcpl(MRMF_H5_CHECK(H5Pcreate(H5P_FILE_CREATE)));
  if (checksummed) keep_links_and_attributes_compact(fcpl.get());
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get());
  if (id < 0) {
    const std::string why = innermost_error();
    MRMF_THROW(Data, path, ": cannot create HDF5 file (", why, ")");
  }
  H5File f;
  f.path_ = path;
  f.file_ = H5FileId(id);
  f.checksummed_ = checksummed;
  return f;
}

void H5File::keep_links_and_attributes_compact(hid_t ocpl) {
  // Past 8 links or attributes HDF5 moves them to "dense" storage (a
  // fractal heap and a B-tree) outside the object header; one damaged byte
  // there made libhdf5 1.10 abort in free() while listing a checkpoint's
  // /state group (session 58's fuzzing of --resume: 7 of 2004 bytes).
  // Compact, they are messages of the object header, under its checksum.
  MRMF_H5_CHECK(H5Pset_link_phase_change(ocpl, 65535, 65535));
  MRMF_H5_CHECK(H5Pset_attr_phase_change(ocpl, 65535, 65535));
}

void H5File::create_group(const std::string& group) {
  MRMF_CHECK(file_, "H5File: file is not open");
  H5PlistId gcpl(MRMF_H5_CHECK(H5Pcreate(H5P_GROUP_CREATE)));
  if (checksummed_) keep_links_and_attributes_compact(gcpl.get());
  const hid_t g = H5Gcreate2(file_.get(), group.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT);
  if (g < 0) {
    const std::string why = innermost_error();
    MRMF_THROW(Data, path_, ": cannot create group '", group, "' (", why, ")");
  }
  MRMF_H5_WARN(H5Gclose(g));
}

void H5File::close() {
  if (!file_) return;
  const hid_t id = file_.release();
  const herr_t flushed = H5Fflush(id, H5F_SCOPE_GLOBAL);
  const std::string flush_why = flushed < 0 ? innermost_error() : std::string();
  const herr_t closed = H5Fclose(id);
  if (flushed < 0 || closed < 0) {
    note_hdf5_close_failure();
    const std::string why = flushed < 0 ? flush_why : innermost_error();
    MRMF_THROW(Data, path_, ": writing the file out failed (", why,
               "; is the disk or quota full?): it is incomplete and was not kept");
  }
}

bool H5File::exists(const std::string& dataset) const {
  MRMF_CHECK(file_, "H5File: file is not open");
  // H5Lexists fails on intermediate groups that do not exist; treat as absent.
  // A damaged (checksum-failing) header on the way is not "absent": it is
  // named, so that an optional entry's damage is not read as its absence.
  const WalkedLinkAccess links(walked_link_targets_);
  const htri_t r = H5Lexists(file_.get(), dataset.c_str(), links.get());
  if (r < 0) {
    links.rethrow_refusal();
    const std::string why = innermost_error();
    MRMF_CHECK_KIND(Data, !detail::hdf5_reports_damage(why), path_, ": looking up '", dataset, "': ", why);
  }
  return r > 0;
}

H5DatasetId H5File::open_dataset(const std::string& dataset) const {
  MRMF_CHECK_KIND(Data, exists(dataset), path_, ": dataset '", dataset, "' not found");
  const WalkedLinkAccess links(walked_link_targets_);
  const hid_t id = H5Dopen2(file_.get(), dataset.c_str(), links.get());
  if (id < 0) {
    links.rethrow_refusal();
    const std::string why = innermost_error();
    MRMF_THROW(Data, path_, ": cannot open dataset '", dataset, "' (", why, ")");
  }
  H5DatasetId d(id);
  require_consistent_compact(d.get(), path_, dataset);
  return d;
}

std::vector<int64_t> H5File::shape(const std::string& dataset) const {
  H5DatasetId d = open_dataset(dataset);
  H5SpaceId space(MRMF_H5_CHECK(H5Dget_space(d.get())));
  return space_dims(space.get(), path_ + ": dataset '" + dataset + "'");
}

DType H5File::dtype(const std::string& dataset) const {
  H5DatasetId d = open_dataset(dataset);
  H5TypeId type(MRMF_H5_CHECK(H5Dget_type(d.get())));
  require_intact_number_type(type.get(), path_, dataset);
  const auto dt = dtype_of_h5(type.get());
  MRMF_CHECK_KIND(Data, dt.has_value(), path_, ": dataset '", dataset, "' has element type ",
                  h5_type_name(type.get()), ", which mrmf cannot read");
  return *dt;
}

bool H5File::ieee_float(const std::string& dataset) const {
  H5DatasetId d = open_dataset(dataset);
  H5TypeId type(MRMF_H5_CHECK(H5Dget_type(d.get())));
  if (H5Tget_class(type.get()) != H5T_FLOAT) return false;
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type.get(), &spos, &epos, &esize, &mpos, &msize) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  const size_t size = H5Tget_size(type.get()), ebias = H5Tget_ebias(type.get());
  const H5T_order_t order = H5Tget_order(type.get());
  if ((order != H5T_ORDER_LE && order != H5T_ORDER_BE) || H5Tget_norm(type.get()) != H5T_NORM_IMPLIED ||
      H5Tget_offset(type.get()) != 0 || mpos != 0)
    return false;
  const auto is = [&](size_t bytes, size_t e, size_t m, size_t bias) {
    return size == bytes && esize == e && msize == m && spos == 8 * bytes - 1 && epos == m && ebias == bias;
  };
  return is(2, 5, 10, 15) || is(4, 8, 23, 127) || is(8, 11, 52, 1023);
}

std::string H5File::type_name(const std::string& dataset) const {
  H5DatasetId d = open_dataset(dataset);
  H5TypeId type(MRMF_H5_CHECK(H5Dget_type(d.get())));
  return h5_type_name(type.get());
}

std::string h5_file_name(hid_t id) {
  const ssize_t n = H5Fget_name(id, nullptr, 0);
  if (n < 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  std::string name(static_cast<size_t>(n) + 1, '\0');
  if (H5Fget_name(id, name.data(), name.size()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  name.resize(static_cast<size_t>(n));
  return name;
}

bool H5File::stored_as(hid_t d, DType dtype) const {
  // A dataset reached through an external link lives in another file: its
  // addresses (H5Dget_offset, H5Dget_chunk_info) are that file's, and
  // mapping them in this one read the wrong bytes without an error. Such a
  // dataset is read through HDF5, which follows the link.
  const std::string here = h5_file_name(file_.get()), there = h5_file_name(d);
  if (here.empty() || here != there) return false;
  H5TypeId type(MRMF_H5_CHECK(H5Dget_type(d)));
  if (H5Tequal(type.get(), file_type(dtype)) <= 0) return false;  // other width, sign or byte order
  H5PlistId fcpl(MRMF_H5_CHECK(H5Fget_create_plist(file_.get())));
  hsize_t userblock = 0;
  MRMF_H5_CHECK(H5Pget_userblock(fcpl.get(), &userblock));
  return userblock == 0;  // kept simple: such files are read through HDF5
}

int64_t H5File::contiguous_offset(const std::string& dataset, DType dtype) const {
  H5DatasetId d = open_dataset(dataset);
  H5PlistId dcpl(MRMF_H5_CHECK(H5Dget_create_plist(d.get())));
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0 || !stored_as(d.get(), dtype))
    return -1;
  const haddr_t off = H5Dget_offset(d.get());
  if (off == HADDR_UNDEF) {  // no storage allocated (never written)
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  // Mapped at a page boundary, the data lie at this offset's alignment:
  // elements read in place must be aligned to their size.
  if (off % dtype_size(dtype) != 0) return -1;
  return static_cast<int64_t>(off);
}

Tensor H5File::read(const std::string& dataset, std::optional<DType> as) const {
  const auto dims = shape(dataset);
  MRMF_CHECK_KIND(Data, !dims.empty(), path_, ": dataset '", dataset, "' is a scalar, expected an array");
  return read_rows(dataset, 0, dims[0], as);
}

Tensor H5File::read_rows(const std::string& dataset, int64_t start, int64_t count, std::optional<DType> as) const {
  auto dims = shape(dataset);
  MRMF_CHECK_KIND(Data, !dims.empty() && dims.size() <= static_cast<size_t>(kMaxDims), path_, ": dataset '", dataset,
                  "' has rank ", dims.size(), ", expected 1 to ", kMaxDims);
  const DType dt = as ? *as : dtype(dataset);
  dims[0] = count;
  Tensor t = Tensor::empty(Shape(dims), dt);
  read_rows_into(dataset, start, count, dt, t.raw_data());
  return t;
}

void H5File::read_rows_into(const std::string& dataset, int64_t start, int64_t count, DType dt, void* dst) const {
  H5DatasetId d = open_dataset(dataset);
  H5SpaceId fspace(MRMF_H5_CHECK(H5Dget_space(d.get())));
  const auto dims = space_dims(fspace.get(), path_ + ": dataset '" + dataset + "'");
  MRMF_CHECK_KIND(Data, !dims.empty(), path_, ": dataset '", dataset, "' is a scalar, expected an array");
  MRMF_CHECK_KIND(Data, start >= 0 && count >= 0 && start + count <= dims[0], path_, ": rows [", start, ", ",
                  start + count, ") of dataset '", dataset, "' are out of range: it has ", dims[0], " rows");
  if (count == 0) return;
  require_intact_number_type(H5TypeId(MRMF_H5_CHECK(H5Dget_type(d.get()))).get(), path_, dataset);
  std::vector<hsize_t> off(dims.size(), 0), cnt(dims.begin(), dims.end());
  off[0] = static_cast<hsize_t>(start);
  cnt[0] = static_cast<hsize_t>(count);
  MRMF_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, off.data(), nullptr, cnt.data(), nullptr));
  check_skipped_filters(d.get(), dataset, dims, start, count);
  H5SpaceId mspace(MRMF_H5_CHECK(H5Screate_simple(static_cast<int>(cnt.size()), cnt.data(), nullptr)));
  if (H5Dread(d.get(), h5_native_type(dt), mspace.get(), fspace.get(), H5P_DEFAULT, dst) < 0) {
    const std::string why = innermost_error();
    MRMF_THROW(Data, path_, ": reading rows [", start, ", ", start + count, ") of dataset '", dataset, "' as ",
               dtype_name(dt), " failed (", why, "); the file may be truncated or corrupt");
  }
}

void H5File::create_dataset(const std::string& dataset, const std::vector<int64_t>& shape, DType dt,
                            const WriteOptions& opts) {
  MRMF_CHECK(file_, "H5File: file is not open");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5SpaceId space(MRMF_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5PlistId dcpl(MRMF_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  MRMF_CHECK_KIND(Usage, opts.chunk.empty() || opts.chunk_rows == 0, "dataset '", dataset,
                  "': a chunk shape and chunk_rows given together (one or the other)");
  // A checksum without a chunk shape: the whole dataset as one chunk, or
  // rows of at most 1 GiB (HDF5 refuses chunks of 4 GiB). A scalar or an
  // empty dataset has no bytes to check and stays contiguous.
  const bool whole_chunk = opts.checksum && opts.chunk.empty() && opts.chunk_rows == 0 && !dims.empty() &&
                           std::all_of(dims.begin(), dims.end(), [](hsize_t x) { return x > 0; });
  const bool checksum = opts.checksum && (whole_chunk || !opts.chunk.empty() || opts.chunk_rows > 0);
  if (whole_chunk || !opts.chunk.empty() || (opts.chunk_rows > 0 && !dims.empty() && dims[0] > 0)) {
    std::vector<hsize_t> chunk = dims;
    if (whole_chunk) {
      hsize_t row_bytes = dtype_size(dt);
      for (size_t i = 1; i < dims.size(); ++i) row_bytes *= dims[i];
      chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (hsize_t{1} << 30) / row_bytes));
    } else if (opts.chunk.empty()) {
      chunk[0] = std::min<hsize_t>(static_cast<hsize_t>(opts.chunk_rows), dims[0]);
    } else {
      MRMF_CHECK_KIND(Usage, opts.chunk.size() == dims.size(), "chunk shape ", shape_str(opts.chunk), " for dataset '",
                      dataset, "' ", shape_str(shape), ": one entry per axis expected");
      for (size_t i = 0; i < dims.size(); ++i) {
        MRMF_CHECK_KIND(Usage, opts.chunk[i] > 0 && static_cast<hsize_t>(opts.chunk[i]) <= dims[i], "chunk shape ",
                        shape_str(opts.chunk), " for dataset '", dataset, "' ", shape_str(shape),
                        ": each entry from 1 to its axis' size expected");
        chunk[i] = static_cast<hsize_t>(opts.chunk[i]);
      }
    }
    MRMF_H5_CHECK(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()));
    if (opts.shuffle) MRMF_H5_CHECK(H5Pset_shuffle(dcpl.get()));
    if (opts.deflate > 0) MRMF_H5_CHECK(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(opts.deflate)));
    // Last: the checksum covers the bytes as stored.
    if (checksum) MRMF_H5_CHECK(H5Pset_fletcher32(dcpl.get()));
  } else {
    MRMF_CHECK_KIND(Usage, opts.deflate == 0 && !opts.shuffle,
                    "compression and shuffling need a chunked dataset (chunk_rows > 0 or a chunk shape)");
    // A scalar cannot be chunked: compact, its value in the (checksummed) header.
    if (opts.checksum && dims.empty()) MRMF_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_COMPACT));
  }
  const hid_t id = H5Dcreate2(file_.get(), dataset.c_str(), file_type(dt), space.get(), H5P_DEFAULT, dcpl.get(),
                              H5P_DEFAULT);
  if (id < 0) {
    const std::string why = innermost_error();
    MRMF_THROW(Data, path_, ": cannot create dataset '", dataset, "' ", shape_str(shape), " (", why, ")");
  }
  H5DatasetId keep(id);
}

void H5File::write_rows(const std::string& dataset, int64_t start, const Tensor& t) {
  MRMF_CHECK(t.is_contiguous() && !t.device().is_cuda(), "write_rows needs a contiguous CPU tensor, got ", t.str());
  H5DatasetId d = open_dataset(dataset);
  H5SpaceId fspace(MRMF_H5_CHECK(H5Dget_space(d.get())));
  const auto dims = space_dims(fspace.get(), path_ + ": dataset '" + dataset + "'");
  MRMF_CHECK_KIND(Shape, static_cast<int>(dims.size()) == t.ndim(), path_, ": dataset '", dataset, "' has rank ",
                  dims.size(), ", tensor ", t.str());
  for (int i = 1; i < t.ndim(); ++i)
    MRMF_CHECK_KIND(Shape, dims[static_cast<size_t>(i)] == t.size(i), path_, ": dataset '", dataset, "' is ",
                    shape_str(dims), ", cannot write ", t.str());
  const int64_t count = t.ndim() ? t.size(0) : 1;
  MRMF_CHECK_KIND(Shape, t.ndim() == 0 || (start >= 0 && start + count <= dims[0]), path_, ": rows [", start, ", ",
                  start + count, ") exceed dataset '", dataset, "' of ", dims.empty() ? 0 : dims[0], " rows");
  if (count == 0) return;
  H5SpaceId mspace;
  if (!dims.empty()) {
    std::vector<hsize_t> off(dims.size(), 0), cnt(dims.begin(), dims.end());
    off[0] = static_cast<hsize_t>(start);
    cnt[0] = static_cast<hsize_t>(count);
    MRMF_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, off.data(), nullptr, cnt.data(), nullptr));
    mspace = H5SpaceId(MRMF_H5_CHECK(H5Screate_simple(static_cast<int>(cnt.size()), cnt.data(), nullptr)));
  } else {
    mspace = H5SpaceId(MRMF_H5_CHECK(H5Screate(H5S_SCALAR)));
  }
  if (H5Dwrite(d.get(), h5_native_type(t.dtype()), mspace.get(), fspace.get(), H5P_DEFAULT, t.raw_data()) < 0) {
    const std::string why = innermost_error();
    MRMF_THROW(Data, path_, ": writing dataset '", dataset, "' failed (", why, ")");
  }
}

void H5File::write(const std::string& dataset, const Tensor& t, const WriteOptions& opts) {
  create_dataset(dataset, t.shape().vec(), t.dtype(), opts);
  write_rows(dataset, 0, t);
}

std::string H5File::read_string(const std::string& dataset) const {
  std::string text;
  {
    H5DatasetId d = open_dataset(dataset);
    const std::string where = path_ + ": dataset '" + dataset + "'";
    check_vlen_string_heap(d.get(), where);  // before libhdf5 walks the heap
    text = read_one_string(d.get(), false, where);
  }
  // A long text's checksum (write_string), in its checksummed header.
  if (const auto sum = read_string_attribute(dataset, kTextChecksum)) {
    MRMF_CHECK_KIND(Data, *sum == text_digest(text), path_, ": dataset '", dataset, "' (", text.size(),
                    " characters) does not match the checksum written with it: the file is damaged");
  }
  return text;
}

void H5File::write_string(const std::string& dataset, const std::string& value, bool variable_length) {
  MRMF_CHECK(file_, "H5File: file is not open");
  H5TypeId type = utf8_type(variable_length, value);
  H5SpaceId space(MRMF_H5_CHECK(H5Screate(H5S_SCALAR)));
  // A fixed-length string that fits is stored compact, inside the object
  // header: where the file's headers carry checksums (create(path, true)),
  // so does the text.
  // A longer one stays a scalar (h5py's f[name][()] reads bytes either way;
  // chunking, for a Fletcher-32 checksum, would make it an array) with its
  // FNV-1a hash in an attribute, inside the checksummed header; read_string
  // compares them.
  H5PlistId dcpl(MRMF_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  const bool compact = !variable_length && value.size() < 32768;
  if (compact) MRMF_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_COMPACT));
  {
    H5DatasetId d(MRMF_H5_CHECK(
        H5Dcreate2(file_.get(), dataset.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT)));
    const char* p = value.c_str();
    MRMF_H5_CHECK(H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           variable_length ? static_cast<const void*>(&p) : p));
  }
  if (!variable_length && !compact) write_string_attribute(dataset, kTextChecksum, text_digest(value));
}

bool H5File::has_attribute(const std::string& object, const std::string& name) const {
  MRMF_CHECK(file_, "H5File: file is not open");
  const WalkedLinkAccess links(walked_link_targets_);
  const htri_t has = H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), links.get());
  if (has < 0) {  // no such object; or its header is damaged, which is not absence
    links.rethrow_refusal();
    const std::string why = innermost_error();
    MRMF_CHECK_KIND(Data, !detail::hdf5_reports_damage(why), path_, ": looking up attribute '", name, "' of '", object,
                    "': ", why);
  }
  return has > 0;
}

std::optional<std::string> H5File::read_string_attribute(const std::string& object, const std::string& name) const {
  if (!has_attribute(object, name)) return std::nullopt;
  const WalkedLinkAccess links(walked_link_targets_);  // has_attribute walked them
  H5AttrId a(MRMF_H5_CHECK(H5Aopen_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT, links.get())));
  return read_one_string(a.get(), true, path_ + ": attribute '" + name + "' of '" + object + "'");
}

void H5File::write_string_attribute(const std::string& object, const std::string& name, const std::string& value) {
  MRMF_CHECK(file_, "H5File: file is not open");
  // An attribute lies in its object's header, at most 64 KiB: a longer
  // value (a long file list) goes to the heap.
  const bool variable = value.size() > 16384;
  H5TypeId type = utf8_type(variable, value);
  H5SpaceId space(MRMF_H5_CHECK(H5Screate(H5S_SCALAR)));
  if (H5Aexists_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0)
    MRMF_H5_CHECK(H5Adelete_by_name(file_.get(), object.c_str(), name.c_str(), H5P_DEFAULT));
  H5AttrId a(MRMF_H5_CHECK(H5Acreate_by_name(file_.get(), object.c_str(), name.c_str(), type.get(), space.get(),
                                             H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  const char* p = value.c_str();
  MRMF_H5_CHECK(H5Awrite(a.get(), type.get(), variable ? static_cast<const void*>(&p) : p));
}

// ------------------------------------------------------------ AtomicOutput
AtomicOutput::AtomicOutput(std::string final_path) : final_(std::move(final_path)) {
  static std::atomic<int> counter{0};
  // Same directory as the final file so that rename() stays on one file system.
  temp_ = final_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void AtomicOutput::commit() {
  std::error_code ec;
  fs::rename(temp_, final_, ec);
  MRMF_CHECK_KIND(Data, !ec, "cannot rename ", temp_, " to ", final_, ": ", ec.message());
  committed_ = true;
}

void write_text_atomically(const std::string& path, const std::string& text) {
  AtomicOutput out(path);
  {
    std::ofstream f(out.temp_path());
    f << text;
    f.close();
    MRMF_CHECK_KIND(Data, !f.fail(), "cannot write ", out.temp_path(), " (is the disk or quota full?)");
  }
  out.commit();
}

}  // namespace mrmf::data
