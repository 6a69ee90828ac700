#include "fusion/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "core/log.h"
#include "core/version.h"
#include "data/h5file.h"
#include "data/prefetch.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace mrmf {

namespace {
using data::H5File;

constexpr const char* kFormat = "mrmf-checkpoint";
constexpr const char* kVersion = "1";

// ------------------------------------------------------------ HDF5 helpers
// H5File covers arrays and strings; checkpoints also need scalars, numeric
// attributes, groups and listings, done here with the C API.
template <class T>
struct H5Types;
template <>
struct H5Types<int64_t> {
  static hid_t file() { return H5T_STD_I64LE; }
  static hid_t mem() { return H5T_NATIVE_INT64; }
};
template <>
struct H5Types<double> {
  static hid_t file() { return H5T_IEEE_F64LE; }
  static hid_t mem() { return H5T_NATIVE_DOUBLE; }
};
template <>
struct H5Types<float> {
  static hid_t file() { return H5T_IEEE_F32LE; }
  static hid_t mem() { return H5T_NATIVE_FLOAT; }
};

template <class T>
void write_scalar(H5File& f, const std::string& path, T v) {
  data::H5SpaceId space(MRMF_H5_CHECK(H5Screate(H5S_SCALAR)));
  // Compact: the value lies in the object header, which the checkpoint's
  // file format checksums (a scalar cannot be chunked for Fletcher-32).
  data::H5PlistId dcpl(MRMF_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  MRMF_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_COMPACT));
  const hid_t id =
      H5Dcreate2(f.id(), path.c_str(), H5Types<T>::file(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT);
  MRMF_CHECK_KIND(Data, id >= 0, f.path(), ": cannot create scalar dataset '", path, "'");
  data::H5DatasetId d(id);
  MRMF_CHECK_KIND(Data, H5Dwrite(d.get(), H5Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0, f.path(),
                  ": writing '", path, "' failed");
}

// Reads a scalar (or 1-element) numeric dataset, converting to T.
template <class T>
T read_scalar(const H5File& f, const std::string& path) {
  MRMF_CHECK_KIND(Data, f.exists(path), f.path(), ": '", path, "' not found");
  const hid_t id = H5Dopen2(f.id(), path.c_str(), H5P_DEFAULT);
  MRMF_CHECK_KIND(Data, id >= 0, f.path(), ": cannot open '", path, "' (", data::innermost_error(), ")");
  data::H5DatasetId d(id);
  data::H5SpaceId space(MRMF_H5_CHECK(H5Dget_space(d.get())));
  MRMF_CHECK_KIND(Data, H5Sget_simple_extent_npoints(space.get()) == 1, f.path(), ": '", path,
                  "' is not a scalar");
  T v{};
  MRMF_CHECK_KIND(Data, H5Dread(d.get(), H5Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0, f.path(),
                  ": reading '", path, "' as a number failed (", data::innermost_error(), ")");
  return v;
}

template <class T>
void write_attr(H5File& f, const std::string& obj, const std::string& name, T v) {
  data::H5SpaceId space(MRMF_H5_CHECK(H5Screate(H5S_SCALAR)));
  const hid_t id = H5Acreate_by_name(f.id(), obj.c_str(), name.c_str(), H5Types<T>::file(), space.get(), H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT);
  MRMF_CHECK_KIND(Data, id >= 0, f.path(), ": cannot create attribute '", name, "' on '", obj, "'");
  data::H5AttrId a(id);
  MRMF_CHECK_KIND(Data, H5Awrite(a.get(), H5Types<T>::mem(), &v) >= 0, f.path(), ": writing attribute '", name,
                  "' failed");
}

template <class T>
std::optional<T> read_attr(const H5File& f, const std::string& obj, const std::string& name) {
  if (!f.has_attribute(obj, name)) return std::nullopt;
  data::H5AttrId a(MRMF_H5_CHECK(H5Aopen_by_name(f.id(), obj.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT)));
  T v{};
  MRMF_CHECK_KIND(Data, H5Aread(a.get(), H5Types<T>::mem(), &v) >= 0, f.path(), ": attribute '", name, "' of '", obj,
                  "' is not a number");
  return v;
}

std::string required_string_attr(const H5File& f, const std::string& name) {
  auto v = f.read_string_attribute("/", name);
  MRMF_CHECK_KIND(Data, v.has_value(), f.path(), ": not an mrmf checkpoint (no root attribute '", name, "')");
  return *v;
}

std::vector<std::string> link_names(const H5File& f, const std::string& group) {
  const hid_t g = H5Gopen2(f.id(), group.c_str(), H5P_DEFAULT);
  MRMF_CHECK_KIND(Data, g >= 0, f.path(), ": cannot open group '", group, "'");
  std::vector<std::string> names;
  H5G_info_t gi;
  bool ok = H5Gget_info(g, &gi) >= 0;
  for (hsize_t i = 0; ok && i < gi.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0) {
      ok = false;
      break;
    }
    std::string s(static_cast<size_t>(n) + 1, '\0');
    H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(), H5P_DEFAULT);
    s.resize(static_cast<size_t>(n));
    names.push_back(s);
  }
  MRMF_H5_WARN(H5Gclose(g));
  MRMF_CHECK_KIND(Data, ok, f.path(), ": cannot list group '", group, "'");
  return names;
}

bool is_counter(const ParamInfo& p) {
  static const std::string suffix = "num_batches_tracked";
  return p.kind == ParamKind::Buffer && p.name.size() >= suffix.size() &&
         p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dims_str(const std::vector<int64_t>& d) { return data::shape_str(d); }

// A contiguous host copy of a (possibly device) tensor.
Tensor to_host(const Tensor& t, Stream& s) {
  if (!t.device().is_cuda()) return t.contiguous(s);
  Tensor h = t.to(Device::cpu(), s);
  s.synchronize();
  return h;
}

void fsync_path(const std::string& p, bool directory) {
  const int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) {
    MRMF_CHECK_KIND(Data, directory, "cannot open ", p, " for fsync: ", std::strerror(errno));
    return;  // directories: best effort (some file systems refuse)
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  MRMF_CHECK_KIND(Data, rc == 0 || directory, "fsync(", p, ") failed: ", std::strerror(err));
}

// Every tensor of a checkpoint carries a Fletcher-32 checksum, so that a
// damaged weight is an error on reading, not a silently different model.
data::WriteOptions checksummed() {
  data::WriteOptions w;
  w.checksum = true;
  return w;
}

// Writes a tensor entry in its PyTorch form.
void write_entry(H5File& f, const std::string& ds, const ParamInfo& p, const Tensor& host) {
  if (is_counter(p)) {
    // PyTorch keeps num_batches_tracked as a 0-dim int64; we count in float.
    write_scalar<int64_t>(f, ds, static_cast<int64_t>(std::llround(host.data<float>()[0])));
  } else if (p.shape.ndim() == 0) {
    write_scalar<float>(f, ds, host.data<float>()[0]);
  } else {
    f.write(ds, host, checksummed());
  }
}

// Reads an entry as float32 with the entry's shape; the caller checked the shape.
Tensor read_entry(const H5File& f, const std::string& ds, const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  // Weights are IEEE floats (float32 as written here; float16 or float64
  // from a converted model): HDF5 converted integers or a damaged float
  // type into other numbers without an error (MSE 6.9e54).
  MRMF_CHECK_KIND(Data, shape.ndim() == 0 || f.ieee_float(ds), f.path(), ": dataset '", ds, "' has element type ",
                  f.type_name(ds), " that is not an IEEE float16, float32 or float64: is the checkpoint damaged?");
  if (shape.ndim() == 0)
    t.data<float>()[0] = static_cast<float>(read_scalar<double>(f, ds));
  else
    f.read_rows_into(ds, 0, shape[0], DType::F32, t.raw_data());  // HDF5 converts e.g. float64
  return t;
}

struct Staged {
  ParamId id;
  Tensor host;
};

// Checks and reads `names` (dataset = prefix + name) for the entries `ids` of
// `store`; every problem is collected, then reported at once (nothing staged
// is used on error).
std::vector<Staged> stage(const H5File& f, const std::string& prefix, const ParamStore& store,
                          const std::vector<ParamId>& ids, const std::string& what) {
  std::vector<Staged> out;
  std::ostringstream missing, mismatched;
  int n_missing = 0, n_mismatched = 0;
  for (ParamId id : ids) {
    const ParamInfo& p = store.info(id);
    const std::string ds = prefix + p.name;
    if (!f.exists(ds)) {
      missing << "\n  '" << p.name << "' (dataset " << ds << ")";
      ++n_missing;
      continue;
    }
    const auto fshape = f.shape(ds);
    if (fshape != p.shape.vec()) {
      mismatched << "\n  '" << p.name << "': checkpoint " << dims_str(fshape) << " vs model "
                 << dims_str(p.shape.vec());
      ++n_mismatched;
      continue;
    }
    out.push_back({id, read_entry(f, ds, p.shape)});
  }
  MRMF_CHECK_KIND(Data, n_missing == 0, f.path(), ": ", n_missing, " ", what,
                  " missing from the checkpoint:", missing.str(),
                  n_mismatched ? "\nand shape mismatches:" + mismatched.str() : std::string(),
                  "\n(a checkpoint of another model, or a damaged one)");
  MRMF_CHECK_KIND(Shape, n_mismatched == 0, f.path(), ": ", n_mismatched, " ", what,
                  " with a different shape in the checkpoint:", mismatched.str());
  return out;
}

CheckpointHeader read_header(const H5File& f) {
  const std::string format = f.read_string_attribute("/", "format").value_or("");
  // (Where the attribute is missing or garbled in a file that was a
  // checkpoint, a damaged header HDF5 could not tell: say both.)
  MRMF_CHECK_KIND(Data, format == kFormat, f.path(), ": not an mrmf checkpoint (format attribute '", format,
                  "'): another kind of HDF5 file, or a damaged checkpoint");
  const std::string version = required_string_attr(f, "format_version");
  MRMF_CHECK_KIND(Data, version == kVersion, f.path(), ": checkpoint format version ", version,
                  " is not supported (this build reads version ", kVersion, ")");
  CheckpointHeader h;
  h.spec.name = required_string_attr(f, "model");
  h.spec.variant = required_string_attr(f, "variant");
  h.spec.sample_shape = shape_from_list(required_string_attr(f, "sample_shape"));
  h.spec.options = decode_options(f.read_string_attribute("/", "model_options").value_or(""));
  try {
    h.spec = normalized(h.spec);
  } catch (const Error& e) {
    MRMF_THROW(Data, f.path(), ": the checkpoint describes a model this build cannot construct: ", e.what());
  }
  h.layout_hash = f.read_string_attribute("/", "layout_hash").value_or("");

  if (f.exists("epoch")) h.training.epoch = read_scalar<int64_t>(f, "epoch");
  if (f.exists("step")) h.training.step = read_scalar<int64_t>(f, "step");
  // A damaged count resumed "epoch -5" (and dropped the run's metrics).
  MRMF_CHECK_KIND(Data, h.training.epoch >= 0 && h.training.step >= 0, f.path(), ": epoch ", h.training.epoch,
                  " and step ", h.training.step, " must not be negative: is the checkpoint damaged?");
  if (f.exists("config")) h.training.config = f.read_string("config");
  if (const auto by = f.read_string_attribute("/", "trained_by")) {  // absent in older checkpoints
    std::istringstream lines(*by);
    for (std::string b; std::getline(lines, b);)
      if (!b.empty()) h.training.trained_by.push_back(b);
  }
  if (f.exists("state")) {
    for (const auto& k : link_names(f, "state")) {
      const std::string ds = "state/" + k;
      const DType dt = f.dtype(ds);
      if (dt == DType::F32 || dt == DType::F64 || dt == DType::F16)
        h.training.state[k] = read_scalar<double>(f, ds);
      else
        h.training.state[k] = read_scalar<int64_t>(f, ds);
    }
  }
  h.has_optimizer = f.exists("optimizer");
  if (h.has_optimizer) h.optimizer_type = f.read_string_attribute("optimizer", "type").value_or("");
  // Its attributes are read by load_scheduler_state alone (--resume):
  // iterating them here made eval, predict and --init read them too, and a
  // damaged attribute header crashes libhdf5 1.10 inside H5Aiterate2.
  h.has_scheduler = f.exists("scheduler");
  return h;
}

void write_optimizer(H5File& f, const Optimizer& opt, const ParamStore& store, Stream& s,
                     const std::function<void(const std::string&)>& done) {
  f.create_group("optimizer");
  f.write_string_attribute("optimizer", "type", opt.type());
  if (const auto* adam = dynamic_cast<const Adam*>(&opt)) {
    const AdamOptions& o = adam->options();
    write_attr<double>(f, "optimizer", "beta1", o.beta1);
    write_attr<double>(f, "optimizer", "beta2", o.beta2);
    write_attr<double>(f, "optimizer", "eps", o.eps);
    write_attr<double>(f, "optimizer", "weight_decay", o.weight_decay);
    write_attr<int64_t>(f, "optimizer", "decoupled", o.decoupled);
  } else if (const auto* sgd = dynamic_cast<const SGD*>(&opt)) {
    const SgdOptions& o = sgd->options();
    write_attr<double>(f, "optimizer", "momentum", o.momentum);
    write_attr<double>(f, "optimizer", "dampening", o.dampening);
    write_attr<double>(f, "optimizer", "weight_decay", o.weight_decay);
    write_attr<int64_t>(f, "optimizer", "nesterov", o.nesterov);
  }
  for (ParamGroup g : {ParamGroup::Bottom, ParamGroup::Top}) {
    const std::string gn = group_name(g);
    write_attr<int64_t>(f, "optimizer", "step_" + gn, opt.step_count(g));
    write_attr<int64_t>(f, "optimizer", "frozen_" + gn, opt.frozen(g));
  }
  for (const auto& st : opt.state_tensors()) {
    const std::string grp = "optimizer/" + st.first;
    f.create_group(grp);
    for (size_t i = 0; i < store.entries().size(); ++i) {
      const ParamInfo& p = store.entries()[i];
      if (p.kind != ParamKind::Param) continue;
      f.write(grp + "/" + p.name, to_host(opt.state_of(st.first, static_cast<ParamId>(i)), s), checksummed());
    }
    if (done) done(grp);
  }
}

// Compares stored hyper-parameters with the optimizer's; differences are
// legitimate (a resumed run may change them) but worth a line in the log.
void compare_hyper(const H5File& f, const Optimizer& opt) {
  std::vector<std::pair<const char*, double>> mine;
  if (const auto* adam = dynamic_cast<const Adam*>(&opt)) {
    const AdamOptions& o = adam->options();
    mine = {{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weight_decay}};
  } else if (const auto* sgd = dynamic_cast<const SGD*>(&opt)) {
    const SgdOptions& o = sgd->options();
    mine = {{"momentum", o.momentum}, {"dampening", o.dampening}, {"weight_decay", o.weight_decay}};
  }
  for (const auto& [k, v] : mine) {
    const auto stored = read_attr<double>(f, "optimizer", k);
    if (stored && *stored != v) log::info("{}: optimizer {} was {} in the checkpoint, now {}", f.path(), k, *stored, v);
  }
}
}  // namespace

// ---------------------------------------------------------------- save
void save_checkpoint(const std::string& path, const ModelSpec& spec_in, const Model& model, const Optimizer* opt,
                     const LrSchedule* sched, const TrainingState& ts, const SaveOptions& options) {
  // HDF5 is not thread-safe: exclude the loaders' I/O thread.
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  const ModelSpec spec = normalized(spec_in);
  MRMF_CHECK_KIND(Usage, spec.name == model.name(), "save_checkpoint: spec is for '", spec.name, "' but the model is '",
                  model.name(), "'");
  MRMF_CHECK_KIND(Usage, spec.sample_shape == model.sample_shape(), "save_checkpoint: spec input shape ",
                  spec.sample_shape.str(), " differs from the model's ", model.sample_shape().str());
  MRMF_CHECK(model.built(), "save_checkpoint: model '", model.name(), "' is not built");
  for (const auto& kv : ts.state)
    MRMF_CHECK_KIND(Usage, !kv.first.empty() && kv.first.find('/') == std::string::npos && kv.first != ".",
                    "checkpoint state key '", kv.first, "' must be non-empty and contain no '/'");
  Stream& s = options.stream ? *options.stream : cpu_stream();
  if (options.stream) s.synchronize();  // the values must be final before they are copied
  auto done = [&](const std::string& item) {
    if (options.after_item) options.after_item(item);
  };

  // Declared first so it is destroyed last: the file is closed before an
  // uncommitted temporary is removed.
  data::AtomicOutput out(path);
  H5File f = H5File::create(out.temp_path(), /*checksummed=*/true);

  f.write_string_attribute("/", "format", kFormat);
  f.write_string_attribute("/", "format_version", kVersion);
  // Provenance only, never compared: the build writing this file, and those
  // that trained the run (a resumed run's earlier ones first).
  f.write_string_attribute("/", "written_by", "mrmf " + build_version());
  if (!ts.trained_by.empty()) {
    std::string list;
    for (const auto& b : ts.trained_by) list += (list.empty() ? "" : "\n") + b;
    f.write_string_attribute("/", "trained_by", list);
  }
  f.write_string_attribute("/", "model", spec.name);
  f.write_string_attribute("/", "variant", spec.variant);
  f.write_string_attribute("/", "sample_shape", shape_to_list(spec.sample_shape));
  f.write_string_attribute("/", "model_options", encode_options(spec.options));
  std::ostringstream hash;
  hash << std::hex << model.params().layout_hash();
  f.write_string_attribute("/", "layout_hash", hash.str());

  const ParamStore& store = model.params();
  f.create_group("model");
  for (size_t i = 0; i < store.entries().size(); ++i) {
    const ParamInfo& p = store.entries()[i];
    const std::string ds = "model/" + p.name;
    write_entry(f, ds, p, to_host(store.value(static_cast<ParamId>(i)), s));
    f.write_string_attribute(ds, "group", group_name(p.group));
    f.write_string_attribute(ds, "kind", p.kind == ParamKind::Param ? "param" : "buffer");
    done(ds);
  }

  if (opt) {
    MRMF_CHECK_KIND(Usage, &opt->store() == &store, "save_checkpoint: the optimizer belongs to another model");
    write_optimizer(f, *opt, store, s, done);
  }
  if (sched) {
    f.create_group("scheduler");
    f.write_string_attribute("scheduler", "describe", sched->describe());
    for (const auto& [k, v] : sched->state()) {
      MRMF_CHECK_KIND(Usage, k != "describe", "scheduler state key 'describe' is reserved");
      write_attr<double>(f, "scheduler", k, v);
    }
    done("scheduler");
  }
  if (options.rank_buffers.defined()) {
    MRMF_CHECK(options.rank_buffers.ndim() == 2 && options.rank_buffers.size(1) == store.buffers().numel(),
               "save_checkpoint: rank_buffers ", options.rank_buffers.str(), " for ", store.buffers().numel(),
               " buffer values");
    f.write("rank_buffers", options.rank_buffers, checksummed());
    done("rank_buffers");
  }
  write_scalar<int64_t>(f, "epoch", ts.epoch);
  write_scalar<int64_t>(f, "step", ts.step);
  f.create_group("state");
  for (const auto& [k, v] : ts.state) {
    if (std::holds_alternative<int64_t>(v))
      write_scalar<int64_t>(f, "state/" + k, std::get<int64_t>(v));
    else
      write_scalar<double>(f, "state/" + k, std::get<double>(v));
  }
  f.write_string("config", ts.config);
  done("config");

  // Durable before visible: close (HDF5 flushes), fsync the bytes, rename,
  // then fsync the directory so the rename itself survives a crash.
  f.close();
  if (options.fsync) fsync_path(out.temp_path(), false);
  out.commit();
  if (options.fsync) {
    const auto dir = std::filesystem::path(path).parent_path();
    fsync_path(dir.empty() ? "." : dir.string(), true);
  }
}

// ---------------------------------------------------------------- load
CheckpointHeader read_checkpoint_header(const std::string& path) {
  // HDF5 is not thread-safe: exclude the loaders' I/O thread.
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  const H5File f = H5File::open_read(path);
  return read_header(f);
}

ParamLoadReport load_params(const std::string& path, Model& model, const ParamLoadOptions& opts) {
  // HDF5 is not thread-safe: exclude the loaders' I/O thread.
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  MRMF_CHECK(model.built(), "load_params: model '", model.name(), "' is not built");
  const H5File f = H5File::open_read(path);
  const CheckpointHeader h = read_header(f);
  MRMF_CHECK_KIND(Data, h.spec.name == model.name(), path, ": the checkpoint holds model '", h.spec.name, "/",
                  h.spec.variant, "', not '", model.name(), "'");
  MRMF_CHECK_KIND(Data, opts.expect_variant.empty() || opts.expect_variant == h.spec.variant, path,
                  ": the checkpoint holds ", h.spec.name, " variant '", h.spec.variant, "', expected '",
                  opts.expect_variant, "'");
  const bool full = opts.groups.empty();
  MRMF_CHECK_KIND(Data, !full || !opts.check_input_shape || h.spec.sample_shape == model.sample_shape(), path,
                  ": the checkpoint is for input shape ", h.spec.sample_shape.str(), ", the model for ",
                  model.sample_shape().str(),
                  " (to transfer across resolutions, load a group only, e.g. bottom, or the whole model with "
                  "train.init_groups: resample)");

  ParamStore& store = model.params();
  std::vector<ParamId> ids;
  for (size_t i = 0; i < store.entries().size(); ++i) {
    const ParamGroup g = store.entries()[i].group;
    if (full || std::find(opts.groups.begin(), opts.groups.end(), g) != opts.groups.end())
      ids.push_back(static_cast<ParamId>(i));
  }
  std::vector<Staged> staged = stage(f, "model/", store, ids, "parameters/buffers");
  if (full) {
    // Strict like torch's load_state_dict: a foreign entry means another architecture.
    std::string extra;
    for (const auto& n : link_names(f, "model"))
      if (store.find(n) < 0) extra += "\n  '" + n + "'";
    MRMF_CHECK_KIND(Data, extra.empty(), path, ": entries in the checkpoint that model '", model.name(),
                    "' does not have:", extra);
  }

  Stream& s = opts.stream ? *opts.stream : cpu_stream();
  ParamLoadReport report;
  for (auto& st : staged) {
    Tensor dst = store.value(st.id);
    dst.copy_from(st.host, s);
    report.loaded.push_back(store.info(st.id).name);
  }
  s.synchronize();  // the staged host tensors die with this scope
  if (opts.freeze_loaded) report.freeze = full ? std::vector<ParamGroup>{ParamGroup::Bottom, ParamGroup::Top} : opts.groups;
  return report;
}

void load_optimizer_state(const std::string& path, Optimizer& opt, Stream* stream) {
  // HDF5 is not thread-safe: exclude the loaders' I/O thread.
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  const H5File f = H5File::open_read(path);
  MRMF_CHECK_KIND(Data, f.exists("optimizer"), path, ": the checkpoint has no optimizer state");
  const std::string type = f.read_string_attribute("optimizer", "type").value_or("");
  MRMF_CHECK_KIND(Data, type == opt.type(), path, ": the checkpoint holds ", type.empty() ? "an unnamed" : type,
                  " optimizer state, the run uses ", opt.type(),
                  type.empty() ? " (the file is damaged, or not a checkpoint of this program)" : "");
  compare_hyper(f, opt);

  const ParamStore& store = opt.store();
  std::vector<ParamId> ids;
  for (size_t i = 0; i < store.entries().size(); ++i)
    if (store.entries()[i].kind == ParamKind::Param) ids.push_back(static_cast<ParamId>(i));
  // Stage everything first: a half-restored optimizer is worse than none.
  std::vector<std::pair<std::string, std::vector<Staged>>> all;
  for (const auto& st : opt.state_tensors())
    all.emplace_back(st.first, stage(f, "optimizer/" + st.first + "/", store, ids, "'" + st.first + "' states"));
  std::array<int64_t, 2> steps{};
  std::array<int64_t, 2> frozen{};
  for (ParamGroup g : {ParamGroup::Bottom, ParamGroup::Top}) {
    const auto st = read_attr<int64_t>(f, "optimizer", std::string("step_") + group_name(g));
    MRMF_CHECK_KIND(Data, st.has_value(), path, ": optimizer step count of group ", group_name(g), " missing");
    steps[static_cast<size_t>(g)] = *st;
    frozen[static_cast<size_t>(g)] = read_attr<int64_t>(f, "optimizer", std::string("frozen_") + group_name(g)).value_or(0);
  }

  Stream& s = stream ? *stream : cpu_stream();
  for (auto& [name, staged] : all)
    for (auto& st : staged) {
      Tensor dst = opt.state_of(name, st.id);
      dst.copy_from(st.host, s);
    }
  s.synchronize();
  for (ParamGroup g : {ParamGroup::Bottom, ParamGroup::Top}) {
    opt.set_step_count(g, steps[static_cast<size_t>(g)]);
    if (frozen[static_cast<size_t>(g)])
      opt.freeze(g);
    else
      opt.unfreeze(g);
  }
}

void load_scheduler_state(const std::string& path, LrSchedule& sched) {
  // HDF5 is not thread-safe: exclude the loaders' I/O thread.
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  const H5File f = H5File::open_read(path);
  MRMF_CHECK_KIND(Data, f.exists("scheduler"), path, ": the checkpoint has no scheduler state");
  // The keys this schedule keeps, each read by name: iterating the
  // attributes (H5Aiterate2) crashed libhdf5 1.10 on a damaged attribute
  // header. A key the file lacks is named by load_state.
  ScheduleState st;
  for (const auto& kv : sched.state())
    if (auto v = read_attr<double>(f, "scheduler", kv.first)) st[kv.first] = *v;
  try {
    sched.load_state(st);
  } catch (const Error& e) {
    MRMF_THROW(Data, path, ": the learning-rate schedule's state: ", e.message());
  }
}

LoadedModel load_model_from_checkpoint(const std::string& path, Device device) {
  // HDF5 is not thread-safe: exclude the loaders' I/O thread.
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  LoadedModel out;
  out.header = read_checkpoint_header(path);
  out.model = build_model(out.header.spec);
  // The seed is irrelevant: every parameter and buffer is overwritten.
  out.model->build(device, 0, default_init_scheme(out.header.spec));
  ParamLoadOptions o;
  o.expect_variant = out.header.spec.variant;
  load_params(path, *out.model, o);
  return out;
}

bool load_rank_buffers(const std::string& path, Model& model, int rank, int ranks, Stream* stream) {
  std::lock_guard<std::recursive_mutex> hdf5_lock(data::hdf5_mutex());
  const H5File f = H5File::open_read(path);
  if (!f.exists("rank_buffers")) return false;
  const auto dims = f.shape("rank_buffers");
  Tensor buf = model.params().buffers();
  if (dims.size() != 2 || dims[0] != ranks || dims[1] != buf.numel()) return false;
  Tensor row = Tensor::empty({buf.numel()});
  f.read_rows_into("rank_buffers", rank, 1, DType::F32, row.raw_data());
  Stream& s = stream ? *stream : cpu_stream();
  buf.copy_from(row.view(buf.shape()), s);
  s.synchronize();
  return true;
}

}  // namespace mrmf
