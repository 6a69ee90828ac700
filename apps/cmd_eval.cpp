// `mrmf eval` and `mrmf predict`: a trained checkpoint applied to one split.
//
//   mrmf eval    --checkpoint runs/ni/checkpoint.h5 --data ni.h5 [--split val|test] [--batch N] [--json]
//   mrmf predict --checkpoint runs/ni/checkpoint.h5 --data ni.h5 --split test --out pred.h5
//
// How the data are read (and why not through data::Loader): the training
// loaders shard a split into floor(N / world / B) * B samples per rank and drop
// the partial last batch, which is right for training but would silently skip
// up to world * B - 1 samples here. Instead every rank reads a contiguous
// range [r * N / W, (r + 1) * N / W) of the split straight from the file
// (data/formats.h) in chunks of --batch, the last chunk shorter, and turns the
// raw frames into model inputs with the same fused downsample kernel and the
// same spec (layout, transform, reduce factors) the loader builds from the run
// config. So EVERY sample is evaluated exactly once whatever the rank count.
//
// Which preprocessing: the run configuration stored in the checkpoint (data
// format, NI layout, transform, reduce), with --data replacing data.path and
// --set / --reduce applied on top. The resulting per-sample shape must equal
// the checkpoint's input shape; otherwise a Usage error (exit 2) names both
// shapes and suggests the --reduce factor that would fit.
//
// Output: eval prints the MSE over all N x P label entries and the MSE per
// target (--json: one JSON object on stdout). predict gathers the
// predictions on rank 0, which writes `predictions` (N, P) and `labels` (N, P)
// float32 in split order, with string attributes checkpoint, model, data,
// split on the file root; the file appears atomically (temporary + rename).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "apps/cli_checks.h"
#include "apps/commands.h"
#include "core/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/output_paths.h"
#include "data/formats.h"
#include "data/gen_neuron.h"
#include "data/h5file.h"
#include "data/loader.h"
#include "fusion/checkpoint.h"
#include "fusion/config.h"
#include "fusion/trainer.h"
#include "kernels/fused_downsample_ops.h"
#include "layers/context.h"
#include "models/neuron_inverter.h"

namespace mrmf::cli {
namespace fs = std::filesystem;
namespace {

struct EvalFlags {
  std::string checkpoint, data, split = "val", out;
  int64_t batch = 0;
  std::vector<int64_t> reduce;
  std::vector<std::string> sets;
  bool json = false;
  bool force = false;  // predict: replace an existing --out
  RuntimeFlags rt;
};

// ------------------------------------------------------------ split reader
// A whole split read in contiguous ranges of samples, in file order, as raw
// frames [count, <raw sample shape>] (stored dtype) and labels [count, P].
class SplitReader {
 public:
  const data::DataSpec& spec() const { return spec_; }
  SplitReader(const RunConfig& cfg, data::Split split) : split_(split) {
    format_ = cfg.data.format;
    log1p_ = cfg.data.transform == "log1p";
    std::string path = cfg.data.path;
    const std::string& files = split == data::Split::Train ? cfg.data.train_files
                               : split == data::Split::Val ? cfg.data.val_files
                                                           : cfg.data.test_files;
    if (!files.empty()) path = files;
    what_ = path + " (" + data::split_name(split) + ")";
    spec_ = data::DataSpec{data::parse_data_format(format_), path, split};
    if (format_ == "neuron_inverter") {
      ni_ = std::make_unique<data::NeuronInverterFile>(data::NeuronInverterFile::open(path, {split}));
      const auto& in = ni_->info(split);
      n_ = in.n;
      p_ = in.p;
      channels_ = in.c;
      spatial_ = {in.t};
      // Same as the loader: (N, T, C) transposed, or the original's x.view(-1, C, T).
      reinterpret_ = cfg.data.layout == "reinterpret";
      raw_ = reinterpret_ ? std::vector<int64_t>{in.c, in.t} : std::vector<int64_t>{in.t, in.c};
      layout_ = reinterpret_ ? kernels::InputLayout::ChannelsFirst : kernels::InputLayout::ChannelsLast;
      dtype_ = in.dtype;
    } else {
      const auto paths = data::cosmoflow_split_files(spec_);  // the loaders' files, in their order
      if (format_ == "cosmoflow") {
        cf_ = std::make_unique<data::CosmoFlowFiles>(data::CosmoFlowFiles::open(paths));
        const auto d = cf_->dims();
        n_ = cf_->total();
        p_ = cf_->params();
        channels_ = cf_->channels();
        raw_ = {d[0], d[1], d[2], channels_};
        layout_ = kernels::InputLayout::ChannelsLast;
        dtype_ = cf_->dtype();
        spatial_ = {d[0], d[1], d[2]};
      } else {  // cosmoflow_lbann: one sample per file, `full` (4, D, H, W)
        lb_ = std::make_unique<data::CosmoFlowLbannFiles>(data::CosmoFlowLbannFiles::open(paths));
        const auto d = lb_->dims();
        n_ = static_cast<int64_t>(lb_->size());
        p_ = 4;
        channels_ = 4;
        raw_ = {4, d[0], d[1], d[2]};
        layout_ = kernels::InputLayout::ChannelsFirst;
        dtype_ = lb_->dtype();
        spatial_ = {d[0], d[1], d[2]};
      }
    }
    MRMF_CHECK_KIND(Data, n_ > 0, what_, ": the split has no samples");
  }

  int64_t size() const { return n_; }
  int64_t params() const { return p_; }
  int64_t channels() const { return channels_; }
  const std::vector<int64_t>& spatial() const { return spatial_; }
  const std::string& what() const { return what_; }
  kernels::InputLayout layout() const { return layout_; }

  // Samples [begin, begin + count): raw frames (stored dtype) and labels.
  void read(int64_t begin, int64_t count, Tensor& frames, Tensor& labels) const {
    std::vector<int64_t> fd{count};
    fd.insert(fd.end(), raw_.begin(), raw_.end());
    labels = Tensor::empty({count, p_}, DType::F32);
    if (ni_) {
      data::Batch b = ni_->read(split_, begin, count);
      check_values(b.frames, spec_.path + ": dataset '" + data::NeuronInverterFile::frames_name(split_) + "'", begin);
      data::check_finite(b.labels, spec_.path + ": dataset '" + data::NeuronInverterFile::labels_name(split_) + "'",
                         begin);
      frames = reinterpret_ ? b.frames.view(Shape(fd)) : b.frames;
      labels = b.labels;
    } else if (cf_) {
      frames = Tensor::empty(Shape(fd), dtype_);
      const int64_t per = frames.numel() / count;
      int64_t done = 0;
      while (done < count) {  // runs of consecutive samples within one file
        const auto [f, row] = cf_->locate(begin + done);
        const int64_t k = std::min(count - done, cf_->samples(f) - row);
        data::Batch b = cf_->read(f, row, k);
        check_values(b.frames, cf_->path(f) + ": dataset '3Dmap'", row);
        data::check_finite(b.labels, cf_->path(f) + ": dataset 'unitPar'", row);
        std::memcpy(static_cast<char*>(frames.raw_data()) + done * per * dtype_size(dtype_), b.frames.raw_data(),
                    b.frames.nbytes());
        std::memcpy(labels.data<float>() + done * p_, b.labels.data<float>(), b.labels.nbytes());
        done += k;
      }
    } else {
      frames = Tensor::empty(Shape(fd), dtype_);
      const int64_t per = frames.numel() / count;
      for (int64_t i = 0; i < count; ++i) {
        data::Batch b = lb_->read(static_cast<size_t>(begin + i));
        check_values(b.frames, lb_->path(static_cast<size_t>(begin + i)) + ": dataset 'full'");
        data::check_finite(b.labels, lb_->path(static_cast<size_t>(begin + i)) + ": dataset 'unitPar'");
        std::memcpy(static_cast<char*>(frames.raw_data()) + i * per * dtype_size(dtype_), b.frames.raw_data(),
                    b.frames.nbytes());
        std::memcpy(labels.data<float>() + i * p_, b.labels.data<float>(), b.labels.nbytes());
      }
    }
  }

 private:
  // As the loaders check what they read: NaN/Inf, and with log1p values
  // <= -1, named by file, dataset and index -- not found later as
  // "non-finite predictions" blamed on the checkpoint.
  void check_values(const Tensor& frames, const std::string& what, int64_t first_row = 0) const {
    data::check_finite(frames, what, first_row);
    if (log1p_) data::check_log1p_domain(frames, what, first_row);
  }

  data::Split split_;
  std::string format_, what_;
  std::unique_ptr<data::NeuronInverterFile> ni_;
  std::unique_ptr<data::CosmoFlowFiles> cf_;
  std::unique_ptr<data::CosmoFlowLbannFiles> lb_;
  int64_t n_ = 0, p_ = 0, channels_ = 0;
  std::vector<int64_t> spatial_, raw_;
  kernels::InputLayout layout_ = kernels::InputLayout::ChannelsLast;
  DType dtype_ = DType::F32;
  bool reinterpret_ = false, log1p_ = false;
  data::DataSpec spec_;
};

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The run config the checkpoint was trained with, adapted to this data.
// Says when the checkpoint carries no run configuration.
RunConfig eval_config(const EvalFlags& f, const CheckpointHeader& h) {
  std::vector<std::string> sets;
  std::string text = h.training.config;
  if (text.empty()) {  // a checkpoint written without a run (converted from PyTorch, a test): defaults by model
    text = "model: {name: " + h.spec.name + "}\ndata: {format: " +
           std::string(h.spec.name == "cosmoflow" ? "cosmoflow" : "neuron_inverter") + "}\n";
    if (f.sets.empty())
      log::warn("{} carries no run configuration: the data are read with the defaults (no input transform, "
                "layout transpose); give the training's data.* keys with --set (e.g. data.transform=log1p)",
                f.checkpoint);
  }
  sets.push_back("data.path=" + yaml_quoted(f.data));
  // A run trained on explicit file lists must not keep them for another data set.
  sets.insert(sets.end(), {"data.train_files=''", "data.val_files=''", "data.test_files=''"});
  // Where the training ran is not where this runs: the device and threads
  // come from --device/--threads, --set runtime.*, or $MRMF_DEVICE and auto
  // (a GPU run's checkpoint is evaluated on a login node's CPU too).
  sets.insert(sets.end(), {"runtime.device=''", "runtime.threads=0"});
  for (const auto& a : f.sets)  // the model is rebuilt from the checkpoint: such a key would be silently ignored
    MRMF_CHECK_KIND(Usage, a.rfind("model.", 0) != 0, "--set ", a,
                    ": the model comes from the checkpoint and cannot be changed here (only data.* and runtime.* "
                    "keys have an effect)");
  sets.insert(sets.end(), f.sets.begin(), f.sets.end());
  if (!f.reduce.empty()) sets.push_back("data.reduce=" + list_str(f.reduce));
  RunConfig cfg = parse_run_config(text, sets, f.checkpoint);
  // The model records the layout its weights were trained on: data read the
  // other way gave a loss without an error (--set data.layout=reinterpret
  // on a transpose checkpoint).
  const auto it = h.spec.options.find("input_layout");
  if (h.spec.name == "neuron_inverter" && it != h.spec.options.end()) {
    const std::string trained =
        parse_input_layout(it->second) == NiInputLayout::ReinterpretView ? "reinterpret" : "transpose";
    const bool given =
        std::any_of(f.sets.begin(), f.sets.end(), [](const std::string& a) { return a.rfind("data.layout=", 0) == 0; });
    MRMF_CHECK_KIND(Usage, !given || cfg.data.layout == trained, "--set data.layout=", cfg.data.layout, ": ",
                    f.checkpoint, " was trained on input laid out as '", trained, "' (its model's input_layout is ",
                    it->second, "); read the other way its inputs are meaningless");
    cfg.data.layout = trained;
  }
  return cfg;
}

// The fused-kernel spec the loader would use for this config.
kernels::FusedDownsampleSpec input_spec(const RunConfig& cfg, const SplitReader& r, Shape& sample_shape) {
  const size_t k = r.spatial().size();
  std::vector<int64_t> fac = cfg.data.reduce;
  if (fac.empty()) fac.assign(k, 1);
  if (fac.size() == 1 && k > 1) fac.assign(k, fac[0]);
  MRMF_CHECK_KIND(Usage, fac.size() == k, "reduce: ", cfg.data.reduce.size(), " factor(s) given, ", r.what(), " has ",
                  k, " spatial axis/axes");
  std::vector<int64_t> out{r.channels()};
  for (size_t d = 0; d < k; ++d) {
    MRMF_CHECK_KIND(Usage, r.spatial()[d] % fac[d] == 0, r.what(), ": spatial axis ", d, " has length ",
                    r.spatial()[d], ", not divisible by the reduce factor ", fac[d]);
    out.push_back(r.spatial()[d] / fac[d]);
  }
  sample_shape = Shape(out);
  check_scale_channels(cfg, r.channels());  // as train says it (the kernel's own check named no config key)
  kernels::FusedDownsampleSpec s;
  s.layout = r.layout();
  if (cfg.data.transform == "log1p") s.transform = kernels::FusedTransform::Log1p;
  if (cfg.data.transform == "scale") {
    s.transform = kernels::FusedTransform::Scale;
    for (double v : cfg.data.scale) s.scale.push_back(static_cast<float>(v));
    s.shift.assign(s.scale.size(), 0.f);
  }
  s.levels = {fac};
  return s;
}

// Refuses data whose (reduced) resolution differs from the model's input,
// suggesting the reduce factors that would make it fit.
void check_resolution(const Shape& got, const Shape& want, const RunConfig& cfg, const SplitReader& r,
                      const std::string& ckpt) {
  if (got == want) return;
  std::string hint;
  if (got.ndim() == want.ndim() && got[0] == want[0]) {
    std::vector<int64_t> fit;
    for (size_t d = 0; d < r.spatial().size(); ++d) {
      const int64_t w = want[static_cast<int>(d) + 1];
      if (w <= 0 || r.spatial()[d] % w != 0) break;
      fit.push_back(r.spatial()[d] / w);
    }
    if (fit.size() == r.spatial().size()) {
      std::string csv;
      for (size_t i = 0; i < fit.size(); ++i) csv += (i ? "," : "") + std::to_string(fit[i]);
      hint = "; pass --reduce " + csv;
    }
  }
  MRMF_THROW(Usage, r.what(), " gives model inputs of shape ", got.str(), " (reduce ", list_str(cfg.data.reduce),
             ") but the checkpoint ", ckpt, " expects ", want.str(), hint);
}

struct EvalResult {
  int64_t n = 0, p = 0;
  double mse = 0;
  std::vector<double> per_target;
  Tensor pred, labels;  // rank 0, predict only: [N, P]
  std::string model;
  std::string data;  // what was read: --data, or the data.path / data.<split>_files a --set gave instead
};

// Gathers each rank's [n_r, P] rows on rank 0 in rank order (= split order).
Tensor gather_rows(const Communicator& comm, const std::vector<float>& local, int64_t n_total, int64_t p) {
  const int W = comm.size();
  std::vector<int> counts(static_cast<size_t>(W)), displs(static_cast<size_t>(W), 0);
  const int mine = static_cast<int>(local.size());
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm.native());
  for (int r = 1; r < W; ++r) displs[static_cast<size_t>(r)] = displs[r - 1] + counts[r - 1];
  if (comm.is_root())  // never more rows than the root's buffer holds (the ranks agreed on N above)
    MRMF_CHECK(displs[static_cast<size_t>(W - 1)] + counts[static_cast<size_t>(W - 1)] == n_total * p,
               "gather_rows: the ranks hold ", displs[static_cast<size_t>(W - 1)] + counts[static_cast<size_t>(W - 1)],
               " values, expected ", n_total * p);
  Tensor all = comm.is_root() ? Tensor::empty({n_total, p}) : Tensor();
  MPI_Gatherv(local.data(), mine, MPI_FLOAT, comm.is_root() ? all.data<float>() : nullptr, counts.data(),
              displs.data(), MPI_FLOAT, 0, comm.native());
  return all;
}

// The checkpoint's header and the configuration eval and predict run with.
struct EvalSetup {
  CheckpointHeader h;
  RunConfig cfg;
};
EvalSetup eval_setup(const EvalFlags& f) {
  data::parse_split(f.split);  // Usage error for a bad name, before any I/O
  EvalSetup s;
  s.h = read_checkpoint_header(f.checkpoint);
  s.cfg = eval_config(f, s.h);
  return s;
}

EvalResult run_split(const EvalFlags& f, const EvalSetup& setup, bool keep_predictions) {
  const CheckpointHeader& h = setup.h;
  const RunConfig& cfg = setup.cfg;
  Communicator world = Communicator::world();
  RuntimeFlags rt = f.rt;
  if (rt.device.empty()) rt.device = cfg.runtime.device;
  if (rt.threads == 0) rt.threads = static_cast<int>(cfg.runtime.threads);
  apply_runtime_flags(rt);
  RuntimeOptions ro;
  ro.device = rt.device;
  ro.quiet = !world.is_root();
  const Device device = select_device(ro);

  SplitReader reader(cfg, data::parse_split(f.split));
  Shape sample;
  const auto spec = input_spec(cfg, reader, sample);
  check_resolution(sample, h.spec.sample_shape, cfg, reader, f.checkpoint);

  LoadedModel lm = load_model_from_checkpoint(f.checkpoint, device);
  Model& model = *lm.model;
  const int64_t P = reader.params();
  const Shape out_shape = model.output_shape(1);
  MRMF_CHECK_KIND(Usage, out_shape[1] == P, reader.what(), " has ", P, " labels per sample but the model ",
                  h.spec.str(), " predicts ", out_shape[1]);

  Context ctx(device);
  ctx.set_training(false);
  const int64_t B = f.batch > 0 ? f.batch
                    : cfg.train.val_batch_size > 0 ? cfg.train.val_batch_size
                                                   : cfg.train.batch_size;
  const int64_t N = reader.size(), W = world.size(), r = world.rank();
  {
    // Ranks that read different data (a relative --data from different
    // folders, another --split) would mix their rows, and gather more rows
    // than the root has room for: they must agree before any of that.
    const std::string id = data::data_fingerprint(reader.spec()) + "|" + f.split + "|" + sample.str() + "|" +
                           h.layout_hash + "|" + std::to_string(h.training.epoch) + "|" +
                           std::to_string(h.training.step) + "|" + h.training.config + "|" + std::to_string(B) + "|" +
                           (W > 1 ? std::to_string(model.params().values_digest(ctx.stream())) : "");
    world.check_same_on_all_ranks(
        fnv1a64(id), "the data, split, checkpoint (its weights too) and batch to evaluate (" + reader.what() +
                         " on rank 0; is --data relative to a different folder on some rank?)");
  }
  const int64_t begin = r * N / W, end = (r + 1) * N / W;
  std::vector<double> sums(static_cast<size_t>(P) + 1, 0.0);  // per target, then the count of samples
  std::vector<float> mine_pred, mine_lab;
  for (int64_t s = begin; s < end; s += B) {
    const int64_t n = std::min(B, end - s);
    Tensor raw, y;
    reader.read(s, n, raw, y);
    std::vector<int64_t> xd{n};
    for (int i = 0; i < sample.ndim(); ++i) xd.push_back(sample[i]);
    Tensor x = Tensor::empty(Shape(xd));
    kernels::fused_downsample(cpu_stream(), raw, std::vector<Tensor>{x}, spec);
    Tensor pd = model.forward(ctx, device.is_cuda() ? x.to(device, ctx.stream()) : x);
    Tensor pc = pd.device().is_cuda() ? pd.to(Device::cpu(), ctx.stream()) : pd.contiguous();
    ctx.stream().synchronize();
    model.net().clear_saved();
    const float* pp = pc.data<float>();
    const float* yy = y.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < P; ++j) {
        const double d = static_cast<double>(pp[i * P + j]) - static_cast<double>(yy[i * P + j]);
        sums[static_cast<size_t>(j)] += d * d;
      }
    sums[static_cast<size_t>(P)] += static_cast<double>(n);
    if (keep_predictions) {
      mine_pred.insert(mine_pred.end(), pp, pp + n * P);
      mine_lab.insert(mine_lab.end(), yy, yy + n * P);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, world.native());
  EvalResult res;
  res.n = static_cast<int64_t>(sums[static_cast<size_t>(P)]);
  res.p = P;
  res.model = h.spec.str();
  res.data = reader.spec().path;
  double total = 0;
  for (int64_t j = 0; j < P; ++j) {
    res.per_target.push_back(sums[static_cast<size_t>(j)] / static_cast<double>(res.n));
    total += sums[static_cast<size_t>(j)];
  }
  res.mse = total / static_cast<double>(res.n * P);
  MRMF_CHECK_KIND(Runtime, std::isfinite(res.mse), "non-finite predictions on ", reader.what(),
                  " (is the checkpoint from a diverged run?)");
  if (keep_predictions) {
    res.pred = gather_rows(world, mine_pred, N, P);
    res.labels = gather_rows(world, mine_lab, N, P);
  }
  return res;
}

std::vector<std::string> target_names(const std::string& model, int64_t P) {
  std::vector<std::string> v;
  if (model.rfind("neuron_inverter", 0) == 0 && P == data::kNeuronParams) {
    for (const char* s : data::neuron_param_names()) v.emplace_back(s);
  } else if (model.rfind("cosmoflow", 0) == 0 && P == 4) {
    v = {"Omega_m", "sigma_8", "n_s", "H0"};
  } else {
    for (int64_t j = 0; j < P; ++j) v.push_back("target_" + std::to_string(j));
  }
  return v;
}

void print_result(const EvalFlags& f, const EvalResult& r, bool json) {
  const auto names = target_names(r.model, r.p);
  if (json) {
    nlohmann::json j{{"checkpoint", f.checkpoint},
                     {"data", r.data},
                     {"split", f.split},
                     {"model", r.model},
                     {"samples", r.n},
                     {"targets", r.p},
                     {"mse", r.mse},
                     {"target_names", names},
                     {"mse_per_target", r.per_target}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s: %s split of %s, %lld samples x %lld targets\n", r.model.c_str(), f.split.c_str(), r.data.c_str(),
              static_cast<long long>(r.n), static_cast<long long>(r.p));
  std::printf("  MSE %.6g\n", r.mse);
  for (int64_t j = 0; j < r.p; ++j)
    std::printf("    %-12s %.6g\n", names[static_cast<size_t>(j)].c_str(), r.per_target[static_cast<size_t>(j)]);
}

int run_eval(const EvalFlags& f) {
  if (f.json) log::to_stderr();  // stdout is the JSON document
  const EvalResult r = run_split(f, eval_setup(f), false);
  if (Communicator::world().is_root()) print_result(f, r, f.json);
  return 0;
}

// One data value's files for predict's check: the value itself, every file
// a CosmoFlow glob or comma list names, or (a folder) nothing inside it may
// be the output.
void add_data_inputs(const std::string& data, const std::string& out, bool cosmoflow,
                     std::vector<std::string>& inputs) {
  const size_t first = inputs.size();
  inputs.push_back(data);
  std::error_code ec;
  if (fs::is_directory(data, ec)) {
    std::error_code ed, eo;
    const fs::path d = fs::weakly_canonical(data, ed), o = fs::weakly_canonical(out, eo);
    const bool inside = !ed && !eo && std::mismatch(d.begin(), d.end(), o.begin(), o.end()).first == d.end();
    MRMF_CHECK_KIND(Usage, !inside, "--out ", out, " is inside the data folder ", data,
                    "; writing there could replace one of its files");
  } else if (data.find_first_of("*?[,") != std::string::npos) {
    try {
      for (const auto& p : data::expand_file_list(data)) inputs.push_back(p);
    } catch (const Error&) {
      // matches nothing: the reader says so when it opens the split
    }
  }
  // CosmoFlow files are read by folder or glob: an output beside them is
  // taken for one of them by the next command that reads the folder
  // ("dataset '3Dmap' not found"), and --force then refuses it as an input.
  if (!cosmoflow) return;
  const auto folder_of = [](const std::string& p) {
    const fs::path d = fs::path(p).parent_path();
    return d.empty() ? std::string(".") : d.string();
  };
  const std::string out_folder = folder_of(out);
  for (size_t i = first; i < inputs.size(); ++i) {
    if (!fs::is_regular_file(inputs[i], ec)) continue;
    MRMF_CHECK_KIND(Usage, !same_file(out_folder, folder_of(inputs[i])), "--out ", out,
                    " is in the folder of the CosmoFlow input ", inputs[i],
                    ": the next command that reads that folder would take it for a data file");
  }
}

// The files predict reads: the checkpoint, and the data the effective
// configuration names (--data, or a --set data.path / data.*_files that
// replaces it).
std::vector<std::string> data_inputs(const RunConfig& cfg, const std::string& out, const std::string& checkpoint) {
  std::vector<std::string> inputs{checkpoint};
  const bool cosmoflow = cfg.data.format != "neuron_inverter";
  for (const std::string& data : {cfg.data.path, cfg.data.train_files, cfg.data.val_files, cfg.data.test_files})
    if (!data.empty()) add_data_inputs(data, out, cosmoflow, inputs);
  return inputs;
}

int run_predict(const EvalFlags& f) {
  MRMF_CHECK_KIND(Usage, !f.out.empty(), "predict: --out is required");
  if (f.json) log::to_stderr();  // stdout is the JSON document
  const EvalSetup setup = eval_setup(f);
  refuse_output_file(f.out, data_inputs(setup.cfg, f.out, f.checkpoint), f.force);  // before any compute
  const EvalResult r = run_split(f, setup, true);
  if (!Communicator::world().is_root()) return 0;
  const fs::path dir = fs::path(f.out).parent_path();
  if (!dir.empty()) fs::create_directories(dir);
  {
    data::AtomicOutput out(f.out);
    data::H5File h5 = data::H5File::create(out.temp_path());
    h5.write("predictions", r.pred);
    h5.write("labels", r.labels);
    h5.write_string_attribute("/", "checkpoint", f.checkpoint);
    h5.write_string_attribute("/", "model", r.model);
    h5.write_string_attribute("/", "data", r.data);
    h5.write_string_attribute("/", "split", f.split);
    h5.close();
    out.commit();
  }
  if (f.json) {
    print_result(f, r, true);
  } else {
    std::printf("predict: wrote %s: predictions and labels (%lld, %lld); MSE %.6g\n", f.out.c_str(),
                static_cast<long long>(r.n), static_cast<long long>(r.p), r.mse);
  }
  return 0;
}

void add_common(CLI::App* sub, EvalFlags& f) {
  sub->add_option("--checkpoint", f.checkpoint, "checkpoint.h5 of a training run")->required()->check(non_empty());
  sub->add_option("--data", f.data, "data set: Neuron Inverter .h5 file or CosmoFlow folder / glob")
      ->required()
      ->check(non_empty());
  sub->add_option("--split", f.split, "train, val or test")
      ->check(CLI::IsMember({"train", "val", "test"}))
      ->capture_default_str();
  sub->add_option("--batch", f.batch, "samples per forward pass (default: the run's validation batch)")
      ->check(at_least(1));
  sub->add_option("--reduce", f.reduce, "resolution reduction per spatial axis (default: the run's data.reduce)")
      ->delimiter(',')
      ->check(at_least(1));
  sub->add_option("--set", f.sets, "override a key of the checkpoint's run config, e.g. data.transform=log1p");
  sub->add_flag("--json", f.json, "print one JSON object");
  add_runtime_flags(*sub, f.rt);
}

}  // namespace

void add_eval_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<EvalFlags>();
  auto* sub = app.add_subcommand("eval", "MSE (overall and per target) of a checkpoint on every sample of a split");
  add_common(sub, *f);
  sub->callback([f, &action] { action = [f] { return run_eval(*f); }; });
}

void add_predict_command(CLI::App& app, Action& action) {
  auto f = std::make_shared<EvalFlags>();
  f->split = "test";
  auto* sub = app.add_subcommand("predict", "Write a checkpoint's predictions and the labels of every sample of a split");
  add_common(sub, *f);
  sub->add_option("--out,-o", f->out, "output .h5: predictions (N, P), labels (N, P) float32")
      ->required()
      ->check(non_empty());
  sub->add_flag("--force", f->force, "replace an existing --out (never the data or the checkpoint)");
  sub->callback([f, &action] { action = [f] { return run_predict(*f); }; });
}

}  // namespace mrmf::cli
