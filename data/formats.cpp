#include "data/formats.h"

#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace mrmf::data {

const char* split_name(Split s) {
  switch (s) {
    case Split::Train: return "train";
    case Split::Val: return "val";
    case Split::Test: return "test";
  }
  return "?";
}

Split parse_split(const std::string& name) {
  for (Split s : kAllSplits)
    if (name == split_name(s)) return s;
  MRMF_THROW(Usage, "unknown split '", name, "', expected train, val or test");
}

namespace {

// "<path>: dataset '<name>' has rank R, expected N <layout>"
void expect_rank(const H5File& f, const std::string& ds, const std::vector<int64_t>& dims, size_t rank,
                 const char* layout) {
  MRMF_CHECK_KIND(Data, dims.size() == rank, f.path(), ": dataset '", ds, "' has rank ", dims.size(), ", expected ",
                  rank, " ", layout);
}

void expect_present(const H5File& f, const std::string& ds, const std::string& what) {
  MRMF_CHECK_KIND(Data, f.exists(ds), f.path(), ": dataset '", ds, "' not found (expected ", what, ")");
}

// A filter HDF5 cannot decode (lzf from h5py, say, without its plugin)
// failed only at the first read, inside training, as "truncated or
// corrupt". Every dataset whose type is checked is read, so it is checked
// here.
void expect_decodable(const H5File& f, const std::string& ds) {
  const auto missing = f.undecodable_filter(ds);
  MRMF_CHECK_KIND(Data, !missing, f.path(), ": dataset '", ds, "' is stored with HDF5 filter '",
                  missing ? missing->name : "", "' (id ", missing ? missing->id : 0,
                  "), which this HDF5 cannot decode: no such filter is built in and no plugin for it was found "
                  "(HDF5_PLUGIN_PATH). Install its plugin, or rewrite the file without it where the filter exists: "
                  "`h5repack -f ",
                  ds, ":NONE IN.h5 OUT.h5`, or -f ", ds, ":GZIP=4");
}

// Storage that was never written reads as HDF5's fill value without an
// error: a loader trained on the zeros (H5File::unstored_part).
void expect_stored(const H5File& f, const std::string& ds) {
  const auto why = f.unstored_part(ds);
  MRMF_CHECK_KIND(Data, !why, f.path(), ": dataset '", ds, "': ", why.value_or(""),
                  "; HDF5 would read the missing values as its fill value (zeros) without an error, so the file is "
                  "refused");
}

DType expect_dtype(const H5File& f, const std::string& ds, std::initializer_list<DType> allowed, const char* expected) {
  expect_decodable(f, ds);
  expect_stored(f, ds);
  const std::string stored = f.type_name(ds);
  bool ok = false;
  DType dt = DType::F32;
  try {
    dt = f.dtype(ds);
    for (DType a : allowed) ok = ok || a == dt;
  } catch (const Error&) {
    ok = false;
  }
  MRMF_CHECK_KIND(Data, ok, f.path(), ": dataset '", ds, "' has element type ", stored, ", expected ", expected);
  return dt;
}

void expect_float_labels(const H5File& f, const std::string& ds) {
  // Labels are read as float32 with HDF5 converting other float widths.
  expect_dtype(f, ds, {DType::F32, DType::F16, DType::F64}, "float32");
}

}  // namespace

// ============================================================ Neuron Inverter
std::string NeuronInverterFile::frames_name(Split s) { return std::string(split_name(s)) + "_frames"; }
std::string NeuronInverterFile::labels_name(Split s) { return std::string(split_name(s)) + "_unitStar_par"; }

NeuronInverterFile NeuronInverterFile::open(const std::string& path, const std::vector<Split>& required) {
  NeuronInverterFile nf;
  nf.path_ = path;
  nf.file_ = H5File::open_read(path);
  const H5File& f = nf.file_;
  std::optional<Split> first;
  for (Split s : kAllSplits) {
    const std::string fn = frames_name(s), ln = labels_name(s);
    bool req = false;
    for (Split r : required) req = req || r == s;
    if (!req && !f.exists(fn) && !f.exists(ln)) continue;  // optional split, absent
    expect_present(f, fn, std::string("(N, T, C) frames of the ") + split_name(s) + " split");
    expect_present(f, ln, std::string("(N, 19) labels of the ") + split_name(s) + " split");
    const auto fd = f.shape(fn), ld = f.shape(ln);
    expect_rank(f, fn, fd, 3, "(N, T, C)");
    expect_rank(f, ln, ld, 2, "(N, 19)");
    NeuronSplitInfo info;
    info.dtype = expect_dtype(f, fn, {DType::F32, DType::F16}, "float32 or float16");
    expect_float_labels(f, ln);
    MRMF_CHECK_KIND(Data, ld[1] == kNeuronParams, path, ": dataset '", ln, "' has shape ", shape_str(ld),
                    ", expected (N, ", kNeuronParams, ")");
    info.n = fd[0];
    info.t = fd[1];
    info.c = fd[2];
    MRMF_CHECK_KIND(Data, info.n > 0, path, ": dataset '", fn, "' is empty (0 samples in the ", split_name(s),
                    " split)");
    MRMF_CHECK_KIND(Data, info.t > 0 && info.c > 0, path, ": dataset '", fn, "' has shape ", shape_str(fd),
                    ", expected T > 0 and C > 0");
    MRMF_CHECK_KIND(Data, ld[0] == info.n, path, ": split '", split_name(s), "' has ", info.n, " frames ('", fn,
                    "') but ", ld[0], " labels ('", ln, "'); expected the same length");
    if (first) {
      const auto& i0 = *nf.info_[static_cast<size_t>(*first)];
      MRMF_CHECK_KIND(Data, i0.t == info.t && i0.c == info.c, path, ": dataset '", fn, "' has (T, C) = (", info.t,
                      ", ", info.c, ") but '", frames_name(*first), "' has (", i0.t, ", ", i0.c,
                      "); expected every split to agree");
    } else {
      first = s;
    }
    nf.info_[static_cast<size_t>(s)] = info;
  }
  MRMF_CHECK_KIND(Data, first.has_value(), path, ": no split found (expected datasets 'train_frames' and '",
                  labels_name(Split::Train), "')");
  return nf;
}

const NeuronSplitInfo& NeuronInverterFile::info(Split s) const {
  const auto& i = info_[static_cast<size_t>(s)];
  MRMF_CHECK_KIND(Data, i.has_value(), path_, ": dataset '", frames_name(s), "' not found (the ", split_name(s),
                  " split is absent)");
  return *i;
}

std::optional<std::string> NeuronInverterFile::meta_json() const {
  if (!file_.exists("meta.JSON")) return std::nullopt;
  return file_.read_string("meta.JSON");
}

Batch NeuronInverterFile::read(Split s, int64_t begin, int64_t count) const {
  const auto& in = info(s);
  Batch b;
  b.frames = Tensor::empty({count, in.t, in.c}, in.dtype);
  b.labels = Tensor::empty({count, in.p}, DType::F32);
  read_into(s, begin, b.frames, b.labels);
  return b;
}

void NeuronInverterFile::read_into(Split s, int64_t begin, Tensor& frames, Tensor& labels) const {
  const auto& in = info(s);
  const int64_t count = frames.ndim() ? frames.size(0) : 0;
  MRMF_CHECK_KIND(Shape, frames.is_contiguous() && frames.shape() == Shape({count, in.t, in.c}) &&
                             (frames.dtype() == in.dtype || frames.dtype() == DType::F32),
                  "read_into: frames must be contiguous [", count, ", ", in.t, ", ", in.c, "] of ",
                  dtype_name(in.dtype), " or float32, got ", frames.str());
  MRMF_CHECK_KIND(Shape, labels.is_contiguous() && labels.shape() == Shape({count, in.p}) && labels.dtype() == DType::F32,
                  "read_into: labels must be contiguous [", count, ", ", in.p, "] float32, got ", labels.str());
  MRMF_CHECK_KIND(Data, begin >= 0 && begin + count <= in.n, path_, ": samples [", begin, ", ", begin + count,
                  ") requested from split '", split_name(s), "' of ", in.n, " samples");
  file_.read_rows_into(frames_name(s), begin, count, frames.dtype(), frames.raw_data());
  file_.read_rows_into(labels_name(s), begin, count, DType::F32, labels.raw_data());
}

NeuronInverterWriter::NeuronInverterWriter(const std::string& path, DType frames_dtype)
    : file_(H5File::create(path)), dtype_(frames_dtype) {
  MRMF_CHECK_KIND(Usage, frames_dtype == DType::F32 || frames_dtype == DType::F16,
                  "Neuron Inverter frames are float32 or float16, not ", dtype_name(frames_dtype));
}

void NeuronInverterWriter::create_split(Split s, int64_t n, int64_t t, int64_t c, int64_t p) {
  file_.create_dataset(NeuronInverterFile::frames_name(s), {n, t, c}, dtype_);
  file_.create_dataset(NeuronInverterFile::labels_name(s), {n, p}, DType::F32);
}

void NeuronInverterWriter::write(Split s, int64_t begin, const Tensor& frames_f32, const Tensor& labels) {
  MRMF_CHECK(frames_f32.ndim() == 3 && labels.ndim() == 2 && frames_f32.size(0) == labels.size(0),
             "NeuronInverterWriter: frames ", frames_f32.str(), " and labels ", labels.str(), " do not match");
  file_.write_rows(NeuronInverterFile::frames_name(s), begin, from_float32(frames_f32, dtype_));
  file_.write_rows(NeuronInverterFile::labels_name(s), begin, labels);
}

void NeuronInverterWriter::write_meta(const std::string& json) {
  file_.write_string("meta.JSON", json, true);  // variable-length, as the original's (h5py)
}

// ================================================== CosmoFlow, authors' layout
std::vector<std::string> expand_file_list(const std::string& pattern_or_list) {
  std::vector<std::string> out;
  std::stringstream ss(pattern_or_list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item.find_first_of("*?[") == std::string::npos) {
      out.push_back(item);  // a plain path: existence is checked when opened
      continue;
    }
    glob_t g{};
    const int rc = ::glob(item.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);  // glob() sorts
    globfree(&g);
    MRMF_CHECK_KIND(Data, rc == 0, "no files match '", item, "'",
                    rc == GLOB_NOMATCH ? "" : " (the directory cannot be read)");
  }
  MRMF_CHECK_KIND(Data, !out.empty(), "empty file list '", pattern_or_list, "'");
  return out;
}

CosmoFlowFiles CosmoFlowFiles::open(const std::vector<std::string>& paths) {
  MRMF_CHECK_KIND(Data, !paths.empty(), "CosmoFlow split: empty file list (expected files with '3Dmap' and 'unitPar')");
  CosmoFlowFiles cf;
  for (size_t i = 0; i < paths.size(); ++i) {
    const H5File f = H5File::open_read(paths[i]);
    // The other CosmoFlow layout: say which format key reads it.
    MRMF_CHECK_KIND(Data, f.exists("3Dmap") || !f.exists("full"), f.path(),
                    ": holds LBANN's layout ('full', one sample per file), not the authors' ('3Dmap'): set "
                    "data.format: cosmoflow_lbann");
    expect_present(f, "3Dmap", "(n, D, H, W, 4) voxel counts");
    expect_present(f, "unitPar", "(n, 4) float32 labels");
    const auto md = f.shape("3Dmap"), ld = f.shape("unitPar");
    expect_rank(f, "3Dmap", md, 5, "(n, D, H, W, 4)");
    expect_rank(f, "unitPar", ld, 2, "(n, 4)");
    MRMF_CHECK_KIND(Data, md[4] == 4, f.path(), ": dataset '3Dmap' has shape ", shape_str(md),
                    ", expected 4 channels last (n, D, H, W, 4)");
    MRMF_CHECK_KIND(Data, ld[1] == 4, f.path(), ": dataset 'unitPar' has shape ", shape_str(ld), ", expected (n, 4)");
    const DType dt = expect_dtype(f, "3Dmap", {DType::U16, DType::I16, DType::F32}, "uint16, int16 or float32");
    expect_float_labels(f, "unitPar");
    MRMF_CHECK_KIND(Data, md[0] > 0, f.path(), ": dataset '3Dmap' is empty (0 samples)");
    MRMF_CHECK_KIND(Data, md[1] > 0 && md[2] > 0 && md[3] > 0, f.path(), ": dataset '3Dmap' has shape ",
                    shape_str(md), ", expected D, H, W > 0");
    MRMF_CHECK_KIND(Data, ld[0] == md[0], f.path(), ": ", md[0], " samples in '3Dmap' but ", ld[0],
                    " labels in 'unitPar'; expected the same length");
    const std::array<int64_t, 3> dims{md[1], md[2], md[3]};
    if (i == 0) {
      cf.dims_ = dims;
      cf.dtype_ = dt;
    } else {
      MRMF_CHECK_KIND(Data, dims == cf.dims_, f.path(), ": dataset '3Dmap' has (D, H, W) = (", dims[0], ", ", dims[1],
                      ", ", dims[2], ") but ", paths[0], " has (", cf.dims_[0], ", ", cf.dims_[1], ", ", cf.dims_[2],
                      "); expected all files of a split to agree");
      MRMF_CHECK_KIND(Data, dt == cf.dtype_, f.path(), ": dataset '3Dmap' is ", dtype_name(dt), " but ", paths[0],
                      " holds ", dtype_name(cf.dtype_), "; expected all files of a split to agree");
    }
    cf.paths_.push_back(paths[i]);
    cf.first_.push_back(cf.total_);
    cf.counts_.push_back(md[0]);
    cf.total_ += md[0];
  }
  return cf;
}

std::pair<size_t, int64_t> CosmoFlowFiles::locate(int64_t global) const {
  MRMF_CHECK(global >= 0 && global < total_, "sample ", global, " out of range [0, ", total_, ")");
  // Upper bound on the first-sample table: the file whose range contains `global`.
  size_t lo = 0, hi = first_.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (first_[mid] <= global ? lo : hi) = mid;
  }
  return {lo, global - first_[lo]};
}

Batch CosmoFlowFiles::read(size_t f, int64_t begin, int64_t count) const {
  MRMF_CHECK(f < paths_.size(), "file index ", f, " out of range (", paths_.size(), " files)");
  MRMF_CHECK_KIND(Data, begin >= 0 && count >= 0 && begin + count <= counts_[f], paths_[f], ": samples [", begin, ", ",
                  begin + count, ") requested, the file has ", counts_[f]);
  const H5File h = H5File::open_read(paths_[f]);
  Batch b;
  b.frames = Tensor::empty({count, dims_[0], dims_[1], dims_[2], channels_}, dtype_);
  b.labels = Tensor::empty({count, params_}, DType::F32);
  h.read_rows_into("3Dmap", begin, count, dtype_, b.frames.raw_data());
  h.read_rows_into("unitPar", begin, count, DType::F32, b.labels.raw_data());
  return b;
}

void write_cosmoflow_file(const std::string& path, const Tensor& frames, const Tensor& labels) {
  MRMF_CHECK(frames.ndim() == 5 && frames.size(4) == 4 && labels.ndim() == 2 && labels.size(1) == 4 &&
                 labels.size(0) == frames.size(0) && labels.dtype() == DType::F32,
             "write_cosmoflow_file: expected frames [n, D, H, W, 4] and labels [n, 4] float32, got ", frames.str(),
             " and ", labels.str());
  H5File f = H5File::create(path);
  f.write("3Dmap", frames);
  f.write("unitPar", labels);
  f.close();
}

// ==================================================== CosmoFlow, LBANN layout
CosmoFlowLbannFiles CosmoFlowLbannFiles::open(const std::vector<std::string>& paths) {
  MRMF_CHECK_KIND(Data, !paths.empty(), "CosmoFlow (LBANN) split: empty file list (expected files with 'full')");
  CosmoFlowLbannFiles lf;
  for (size_t i = 0; i < paths.size(); ++i) {
    const H5File f = H5File::open_read(paths[i]);
    MRMF_CHECK_KIND(Data, f.exists("full") || !f.exists("3Dmap"), f.path(),
                    ": holds the authors' layout ('3Dmap', many samples per file), not LBANN's ('full'): set "
                    "data.format: cosmoflow");
    expect_present(f, "full", "(4, D, H, W) sample");
    expect_present(f, "unitPar", "(4,) float32 labels");
    const auto fd = f.shape("full"), ld = f.shape("unitPar");
    expect_rank(f, "full", fd, 4, "(4, D, H, W)");
    MRMF_CHECK_KIND(Data, fd[0] == 4 && fd[1] > 0 && fd[2] > 0 && fd[3] > 0, f.path(), ": dataset 'full' has shape ",
                    shape_str(fd), ", expected (4, D, H, W)");
    MRMF_CHECK_KIND(Data, ld.size() == 1 && ld[0] == 4, f.path(), ": dataset 'unitPar' has shape ", shape_str(ld),
                    ", expected (4,)");
    const DType dt = expect_dtype(f, "full", {DType::F32, DType::I16}, "float32 or int16");
    expect_float_labels(f, "unitPar");
    const std::array<int64_t, 3> dims{fd[1], fd[2], fd[3]};
    if (i == 0) {
      lf.dims_ = dims;
      lf.dtype_ = dt;
    } else {
      MRMF_CHECK_KIND(Data, dims == lf.dims_ && dt == lf.dtype_, f.path(), ": dataset 'full' is ", shape_str(fd), " ",
                      dtype_name(dt), " but ", paths[0], " holds (4, ", lf.dims_[0], ", ", lf.dims_[1], ", ",
                      lf.dims_[2], ") ", dtype_name(lf.dtype_), "; expected all files to agree");
    }
    lf.paths_.push_back(paths[i]);
  }
  return lf;
}

Batch CosmoFlowLbannFiles::read(size_t i) const {
  MRMF_CHECK(i < paths_.size(), "sample ", i, " out of range (", paths_.size(), " files)");
  const H5File f = H5File::open_read(paths_[i]);
  Batch b;
  b.frames = Tensor::empty({4, dims_[0], dims_[1], dims_[2]}, dtype_);
  b.labels = Tensor::empty({4}, DType::F32);
  f.read_rows_into("full", 0, 4, dtype_, b.frames.raw_data());
  f.read_rows_into("unitPar", 0, 4, DType::F32, b.labels.raw_data());
  return b;
}

void write_cosmoflow_lbann_file(const std::string& path, const Tensor& full, const Tensor& labels) {
  MRMF_CHECK(full.ndim() == 4 && full.size(0) == 4 && labels.ndim() == 1 && labels.size(0) == 4,
             "write_cosmoflow_lbann_file: expected full [4, D, H, W] and labels [4], got ", full.str(), " and ",
             labels.str());
  H5File f = H5File::create(path);
  f.write("full", full);
  f.write("unitPar", labels);
  f.close();
}

// ====================================================================== checks
namespace {
// Index of the first element of p[0, n) whose exponent bits are all ones
// (Inf or NaN), read as the same-width unsigned type U, or -1. Streamed and
// mapped samples are checked when read (a 128^3 x 4 float32 cube is 8 M
// values): a branch-free OR over blocks vectorizes (a loop that returns at
// the first hit does not), then the block that has one is searched.
template <typename U>
int64_t first_exponent_all_ones(const void* data, int64_t n, U exp_mask) {
  const U* p = static_cast<const U*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    U any = 0;
    for (int64_t i = b; i < e; ++i) any |= static_cast<U>((p[i] & exp_mask) == exp_mask);
    if (!any) continue;
    for (int64_t i = b; i < e; ++i)
      if ((p[i] & exp_mask) == exp_mask) return i;
  }
  return -1;
}
}  // namespace

int64_t first_non_finite(const Tensor& t) {
  MRMF_CHECK(!t.device().is_cuda() && t.is_contiguous(), "first_non_finite expects a contiguous CPU tensor, got ",
             t.str());
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::F32: return first_exponent_all_ones<uint32_t>(t.raw_data(), n, 0x7F800000u);
    case DType::F16: return first_exponent_all_ones<uint16_t>(t.raw_data(), n, 0x7C00u);
    case DType::F64: return first_exponent_all_ones<uint64_t>(t.raw_data(), n, 0x7FF0000000000000ull);
    default: return -1;  // integer types are always finite
  }
}

namespace {
// "[i, j, k] (flat f)" of flat index `flat` in t, with `first_row` added to i.
std::string index_text(const Tensor& t, int64_t flat, int64_t first_row) {
  int64_t rest = flat;
  std::vector<int64_t> coord(static_cast<size_t>(t.ndim()));
  for (int d = t.ndim() - 1; d >= 0; --d) {
    coord[static_cast<size_t>(d)] = rest % t.size(d);
    rest /= t.size(d);
  }
  if (!coord.empty()) coord[0] += first_row;
  std::ostringstream idx;
  idx << "[";
  for (size_t d = 0; d < coord.size(); ++d) idx << (d ? ", " : "") << coord[d];
  idx << "] (flat " << flat << (first_row ? " of the rows read" : "") << ")";
  return idx.str();
}

// Element `i` of a contiguous CPU tensor of a float or 16/32-bit integer type.
double value_at(const Tensor& t, int64_t i) {
  const void* p = t.raw_data();
  switch (t.dtype()) {
    case DType::F16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::I16: return static_cast<const int16_t*>(p)[i];
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::U16: return static_cast<const uint16_t*>(p)[i];
    default: return t.data<float>()[i];
  }
}
}  // namespace

void check_finite(const Tensor& t, const std::string& what, int64_t first_row) {
  const int64_t bad = first_non_finite(t);
  if (bad < 0) return;
  const double v = value_at(t, bad);
  // Labels and converted frames are read as float32: a float64 value beyond
  // its range arrives as inf although the file's value is finite.
  const char* why = std::isinf(v) && t.dtype() == DType::F32
                        ? " (infinite in the file, or beyond float32's range, |x| > 3.4e38, where the file stores a "
                          "wider type: values are read as float32)"
                        : "";
  MRMF_THROW(Data, what, ": non-finite value ", v, " at index ", index_text(t, bad, first_row), why);
}

void check_log1p_domain(const Tensor& t, const std::string& what, int64_t first_row) {
  MRMF_CHECK(!t.device().is_cuda() && t.is_contiguous(), "check_log1p_domain expects a contiguous CPU tensor, got ",
             t.str());
  const int64_t n = t.numel();
  // Streamed samples are checked on every read (a 128^3 x 4 cube is 8 M
  // values): a branch-free minimum that vectorizes, then the index only when
  // something is out of the domain.
  const auto first_bad = [n](const auto* p) -> int64_t {
    using V = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
    V lo = n > 0 ? p[0] : V(0);
    for (int64_t i = 0; i < n; ++i) lo = p[i] < lo ? p[i] : lo;
    if (!(lo <= -1)) return -1;
    for (int64_t i = 0; i < n; ++i)
      if (p[i] <= -1) return i;
    return -1;
  };
  int64_t bad = -1;
  switch (t.dtype()) {
    case DType::F32: bad = first_bad(t.data<float>()); break;
    case DType::F64: bad = first_bad(static_cast<const double*>(t.raw_data())); break;
    case DType::I16: bad = first_bad(static_cast<const int16_t*>(t.raw_data())); break;
    case DType::I32: bad = first_bad(static_cast<const int32_t*>(t.raw_data())); break;
    case DType::F16:
      for (int64_t i = 0; i < n && bad < 0; ++i)
        if (value_at(t, i) <= -1.0) bad = i;
      break;
    default: return;  // unsigned counts: never below 0
  }
  if (bad < 0) return;
  MRMF_THROW(Data, what, ": value ", value_at(t, bad), " at index ", index_text(t, bad, first_row),
             " is outside the domain of data.transform log1p (expected values > -1, e.g. counts >= 0)");
}

}  // namespace mrmf::data
