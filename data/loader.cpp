// Loaders for the scientific data sets; see data/loader.h for the contract.
#include "data/loader.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>

#include "core/error.h"
#include "data/h5file.h"
#include "data/prefetch.h"
#include "data/shuffle.h"
#include "kernels/fused_downsample_ops.h"

namespace fs = std::filesystem;

namespace mrmf::data {

DataFormat parse_data_format(const std::string& s) {
  if (s == "neuron_inverter") return DataFormat::NeuronInverter;
  if (s == "cosmoflow") return DataFormat::CosmoFlow;
  if (s == "cosmoflow_lbann") return DataFormat::CosmoFlowLbann;
  MRMF_THROW(Usage, "unknown data format '", s, "' (expected neuron_inverter, cosmoflow or cosmoflow_lbann)");
}

const char* data_format_name(DataFormat f) {
  switch (f) {
    case DataFormat::NeuronInverter: return "neuron_inverter";
    case DataFormat::CosmoFlow: return "cosmoflow";
    case DataFormat::CosmoFlowLbann: return "cosmoflow_lbann";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- sources
// One rank's shard of a split: per-sample raw reads (I/O thread, hdf5_mutex
// held), labels in RAM, and the geometry the fused kernel needs.
struct Source {
  virtual ~Source() = default;
  std::string file, dataset;        // for messages
  DType dtype = DType::F32;
  std::vector<int64_t> raw;         // per-sample kernel input shape ([s..., C] or [C, s...])
  kernels::InputLayout layout = kernels::InputLayout::ChannelsLast;
  std::vector<int64_t> spatial;     // spatial lengths in kernel order
  std::vector<std::string> axis_names;
  int64_t channels = 0, params = 0;
  std::vector<int64_t> ids;         // global ids of the local samples
  Tensor labels;                    // [n_local, P] float32
  int64_t common_batches = 0;       // batches every rank can run
  int64_t count() const { return static_cast<int64_t>(ids.size()); }
  int64_t raw_elems() const {
    int64_t e = 1;
    for (int64_t d : raw) e *= d;
    return e;
  }
  int64_t raw_bytes() const { return raw_elems() * static_cast<int64_t>(dtype_size(dtype)); }
  // Preloaded sources hand out pointers into RAM; streamed ones copy into dst.
  virtual const void* raw_ptr(int64_t /*local*/) const { return nullptr; }
  virtual void read_raw(int64_t local, void* dst) = 0;
};


// Neuron Inverter: the original's contiguous slice, preloaded and checked once.
struct NiSource : Source {
  Tensor frames;  // [n_local, T, C] stored dtype
  NiSource(const DataSpec& spec, const LoaderOptions& o) {
    const NeuronInverterFile f = NeuronInverterFile::open(spec.path, {spec.split});
    const NeuronSplitInfo& in = f.info(spec.split);
    file = spec.path;
    dataset = NeuronInverterFile::frames_name(spec.split);
    const int64_t S = in.n / o.world / o.batch_size * o.batch_size;
    MRMF_CHECK_KIND(Data, S > 0, file, ": dataset '", dataset, "' has ", in.n, " samples; with ", o.world,
                    " rank(s) and batch ", o.batch_size, " each rank's shard floor(N / world / batch) * batch is 0 "
                    "samples, expected at least one batch");
    const int64_t begin = o.rank * S;
    frames = Tensor::empty({S, in.t, in.c}, in.dtype);
    labels = Tensor::empty({S, in.p}, DType::F32);
    f.read_into(spec.split, begin, frames, labels);
    check_finite(frames, file + ": dataset '" + dataset + "' (rank shard from sample " + std::to_string(begin) + ")");
    check_finite(labels, file + ": dataset '" + NeuronInverterFile::labels_name(spec.split) + "' (rank shard from sample " +
                             std::to_string(begin) + ")");
    dtype = in.dtype;
    channels = in.c;
    params = in.p;
    spatial = {in.t};
    axis_names = {"T"};
    if (o.ni_layout == NiLayout::Transpose) {
      raw = {in.t, in.c};
      layout = kernels::InputLayout::ChannelsLast;
    } else {  // x.view(-1, C, T): the same bytes read as C rows of T
      raw = {in.c, in.t};
      layout = kernels::InputLayout::ChannelsFirst;
    }
    for (int64_t i = 0; i < S; ++i) ids.push_back(begin + i);
    common_batches = S / o.batch_size;
  }
  const void* raw_ptr(int64_t local) const override {
    return static_cast<const char*>(frames.raw_data()) + local * raw_bytes();
  }
  void read_raw(int64_t local, void* dst) override {
    std::memcpy(dst, raw_ptr(local), static_cast<size_t>(raw_bytes()));
  }
};

std::vector<std::string> cosmo_paths(const DataSpec& spec) {
  if (fs::is_directory(spec.path)) {
    const fs::path sub = fs::path(spec.path) / split_name(spec.split);
    return expand_file_list(((fs::is_directory(sub) ? sub : fs::path(spec.path)) / "*.h5").string());
  }
  return expand_file_list(spec.path);
}

// Rank assignment shared by both CosmoFlow layouts: files round-robin, or
// contiguous sample shards when there are fewer files than ranks. Fills
// `picks` with (file, row, global id) and the common batch count.
struct Pick {
  size_t file;
  int64_t row, id;
};
std::vector<Pick> cosmo_shard(const std::vector<int64_t>& per_file, const LoaderOptions& o, const std::string& what,
                              int64_t& common_batches) {
  const size_t F = per_file.size();
  std::vector<int64_t> first(F + 1, 0);
  for (size_t f = 0; f < F; ++f) first[f + 1] = first[f] + per_file[f];
  const int64_t total = first[F];
  std::vector<Pick> picks;
  if (static_cast<int64_t>(F) >= o.world) {
    std::vector<int64_t> per_rank(static_cast<size_t>(o.world), 0);
    for (size_t f = 0; f < F; ++f) per_rank[f % static_cast<size_t>(o.world)] += per_file[f];
    const int64_t least = *std::min_element(per_rank.begin(), per_rank.end());
    common_batches = least / o.batch_size;
    MRMF_CHECK_KIND(Data, common_batches > 0, what, ": ", total, " samples in ", F, " file(s) dealt to ", o.world,
                    " rank(s) give a shard of ", least, " samples, smaller than one batch of ", o.batch_size);
    for (size_t f = static_cast<size_t>(o.rank); f < F; f += static_cast<size_t>(o.world))
      for (int64_t r = 0; r < per_file[f]; ++r) picks.push_back({f, r, first[f] + r});
  } else {
    const int64_t per = total / o.world;
    common_batches = per / o.batch_size;
    MRMF_CHECK_KIND(Data, common_batches > 0, what, ": ", total, " samples in ", F, " file(s) shared by ", o.world,
                    " rank(s) give a shard of ", per, " samples, smaller than one batch of ", o.batch_size);
    for (int64_t g = o.rank * per; g < (o.rank + 1) * per; ++g) {
      const size_t f = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), g) - first.begin() - 1);
      picks.push_back({f, g - first[f], g});
    }
  }
  return picks;
}

// CosmoFlow, authors' layout: `3Dmap` (n, D, H, W, 4), streamed one sample at a time.
struct CosmoSource : Source {
  CosmoFlowFiles cf;
  std::vector<Pick> picks;
  std::map<size_t, H5File> open_;  // I/O thread only
  CosmoSource(const DataSpec& spec, const LoaderOptions& o) : cf(CosmoFlowFiles::open(cosmo_paths(spec))) {
    file = cf.path(0);
    dataset = "3Dmap";
    std::vector<int64_t> per_file;
    for (size_t f = 0; f < cf.num_files(); ++f) per_file.push_back(cf.samples(f));
    picks = cosmo_shard(per_file, o, spec.path + " (" + split_name(spec.split) + ")", common_batches);
    const auto d = cf.dims();
    dtype = cf.dtype();
    channels = cf.channels();
    params = cf.params();
    raw = {d[0], d[1], d[2], channels};
    spatial = {d[0], d[1], d[2]};
    axis_names = {"D (x)", "H (y)", "W (z)"};
    layout = kernels::InputLayout::ChannelsLast;
    labels = Tensor::empty({static_cast<int64_t>(picks.size()), params}, DType::F32);
    std::map<size_t, Tensor> file_labels;
    for (size_t i = 0; i < picks.size(); ++i) {
      const size_t f = picks[i].file;
      if (!file_labels.count(f)) {
        file_labels[f] = H5File::open_read(cf.path(f)).read("unitPar");
        check_finite(file_labels[f], cf.path(f) + ": dataset 'unitPar'");
      }
      std::memcpy(labels.data<float>() + static_cast<int64_t>(i) * params,
                  file_labels[f].data<float>() + picks[i].row * params, static_cast<size_t>(params) * 4);
      ids.push_back(picks[i].id);
    }
  }
  void read_raw(int64_t local, void* dst) override {
    const Pick& p = picks[static_cast<size_t>(local)];
    auto it = open_.find(p.file);
    if (it == open_.end()) {
      if (open_.size() >= 32) open_.clear();  // bound the open handles
      it = open_.emplace(p.file, H5File::open_read(cf.path(p.file))).first;
    }
    it->second.read_rows_into("3Dmap", p.row, 1, dtype, dst);
    if (dtype == DType::F32) {  // integer counts are always finite
      std::vector<int64_t> sh{1};
      sh.insert(sh.end(), raw.begin(), raw.end());
      check_finite(Tensor::from_blob(dst, Shape(sh), dtype),
                   cf.path(p.file) + ": dataset '3Dmap' sample " + std::to_string(p.row));
    }
  }
};

// CosmoFlow, LBANN layout: one sample per file, `full` (4, D, H, W).
struct LbannSource : Source {
  CosmoFlowLbannFiles lf;
  std::vector<std::string> paths;
  std::vector<Pick> picks;
  LbannSource(const DataSpec& spec, const LoaderOptions& o)
      : lf(CosmoFlowLbannFiles::open(cosmo_paths(spec))), paths(cosmo_paths(spec)) {
    file = paths[0];
    dataset = "full";
    picks = cosmo_shard(std::vector<int64_t>(paths.size(), 1), o, spec.path + " (" + split_name(spec.split) + ")",
                        common_batches);
    const auto d = lf.dims();
    dtype = lf.dtype();
    channels = 4;
    params = 4;
    raw = {4, d[0], d[1], d[2]};
    spatial = {d[0], d[1], d[2]};
    axis_names = {"D (x)", "H (y)", "W (z)"};
    layout = kernels::InputLayout::ChannelsFirst;
    labels = Tensor::empty({static_cast<int64_t>(picks.size()), params}, DType::F32);
    for (size_t i = 0; i < picks.size(); ++i) {
      const Tensor l = H5File::open_read(paths[picks[i].file]).read("unitPar");
      check_finite(l, paths[picks[i].file] + ": dataset 'unitPar'");
      std::memcpy(labels.data<float>() + static_cast<int64_t>(i) * 4, l.data<float>(), 16);
      ids.push_back(picks[i].id);
    }
  }
  void read_raw(int64_t local, void* dst) override {
    const std::string& p = paths[picks[static_cast<size_t>(local)].file];
    H5File::open_read(p).read_rows_into("full", 0, 4, dtype, dst);
    if (dtype == DType::F32) {
      std::vector<int64_t> sh{1};
      sh.insert(sh.end(), raw.begin(), raw.end());
      check_finite(Tensor::from_blob(dst, Shape(sh), dtype), p + ": dataset 'full'");
    }
  }
};

int64_t default_cache_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 4 : int64_t(4) << 30;
}

// ---------------------------------------------------------------- the loader
struct Produced {
  Tensor x, y;    // CPU device: final float32 batch; CUDA: pinned raw staging + labels
  int slot = -1;  // pinned slot to give back (CUDA path)
};

class LoaderImpl final : public Loader {
 public:
  LoaderImpl(std::unique_ptr<Source> src, const LoaderOptions& o) : o_(o), src_(std::move(src)) {
    const Source& s = *src_;
    const size_t k = s.spatial.size();
    std::vector<int64_t> f = o_.reduce;
    if (f.empty()) f.assign(k, 1);
    if (f.size() == 1 && k > 1) f.assign(k, f[0]);
    MRMF_CHECK_KIND(Usage, f.size() == k, "reduce: ", o_.reduce.size(), " factor(s) given, ", s.file, " has ", k,
                    " spatial axis/axes");
    for (size_t d = 0; d < k; ++d)
      MRMF_CHECK_KIND(Data, f[d] >= 1 && s.spatial[d] % f[d] == 0, s.file, ": dataset '", s.dataset, "' axis ",
                      s.axis_names[d], " has length ", s.spatial[d], ", not divisible by the reduce factor ", f[d]);
    spec_.layout = s.layout;
    spec_.transform = o_.transform.kind;
    spec_.scale = o_.transform.scale;
    spec_.shift = o_.transform.shift;
    spec_.levels = {f};
    std::vector<int64_t> out{s.channels};
    for (size_t d = 0; d < k; ++d) out.push_back(s.spatial[d] / f[d]);
    sample_shape_ = Shape(out);
    // Validates the transform against the channels now rather than in the I/O thread.
    kernels::fused_downsample_shapes(in_shape(1), spec_, "loader");
    out_elems_ = sample_shape_.numel();
    batches_ = s.common_batches;
    const bool cuda = o_.device.is_cuda();
    const int64_t per_sample = cuda ? s.raw_bytes() : out_elems_ * 4;
    const int64_t limit = o_.cache_max_bytes > 0 ? o_.cache_max_bytes : default_cache_limit();
    // On CUDA a preloaded shard is already the cache (the GPU reduction is cheap).
    cache_on_ = o_.cache_in_memory && !(cuda && s.raw_ptr(0)) && s.count() * per_sample <= limit;
    cache_sample_bytes_ = per_sample;
    if (cuda) {
      stream_ = Stream::create(o_.device);
      for (int i = 0; i <= std::max(o_.prefetch_depth, 0); ++i) {
        slot_x_.push_back(Tensor::empty(in_shape(o_.batch_size), s.dtype, Device::cpu(), true));
        slot_y_.push_back(Tensor::empty({o_.batch_size, s.params}, DType::F32, Device::cpu(), true));
        free_slots_.push_back(i);
      }
      dev_raw_ = Tensor::empty(in_shape(o_.batch_size), s.dtype, o_.device);
    }
  }

  ~LoaderImpl() override {
    cancel_inflight();
    std::lock_guard<std::recursive_mutex> h(hdf5_mutex());  // HDF5 handles close under the lock
    src_.reset();
  }

  void start_epoch(int64_t epoch) override { begin(epoch, 0); }

  bool next(LoaderBatch& out) override {
    if (!started_) begin(0, 0);
    if (next_batch_ >= batches_) return false;
    const auto t0 = Clock::now();
    Produced p;
    if (o_.prefetch_depth <= 0) {
      std::lock_guard<std::recursive_mutex> h(hdf5_mutex());
      p = produce(next_batch_);
    } else {
      std::future<Produced> f = std::move(inflight_.front());
      inflight_.pop_front();
      try {
        p = f.get();  // re-throws an I/O-thread error with its message
      } catch (...) {
        // The batch is lost; keep the indices of the following ones right.
        wait_ += std::chrono::duration<double>(Clock::now() - t0).count();
        ++next_batch_;
        fill();
        throw;
      }
      fill();  // keep the I/O thread busy while this batch is finished and used
    }
    if (o_.device.is_cuda()) {
      // Raw samples -> device on the loader's stream, reduced there.
      dev_raw_.copy_from(p.x, stream_);
      Tensor x = Tensor::empty(batch_shape(), DType::F32, o_.device);
      kernels::fused_downsample(stream_, dev_raw_, std::vector<Tensor>{x}, spec_);
      Tensor y = Tensor::empty({o_.batch_size, src_->params}, DType::F32, o_.device);
      y.copy_from(p.y, stream_);
      stream_.synchronize();
      release_slot(p.slot);
      p.x = x;
      p.y = y;
    }
    wait_ += std::chrono::duration<double>(Clock::now() - t0).count();
    out.x = p.x;
    out.y = p.y;
    out.index = next_batch_++;
    return true;
  }

  int64_t batches_per_epoch() const override { return batches_; }
  int64_t batch_size() const override { return o_.batch_size; }
  int64_t local_samples() const override { return src_->count(); }
  Shape sample_shape() const override { return sample_shape_; }
  int64_t num_labels() const override { return src_->params; }
  double wait_seconds() const override { return wait_; }
  LoaderState state() const override { return {epoch_, started_ ? next_batch_ : 0, o_.seed}; }
  void restore(const LoaderState& st) override {
    MRMF_CHECK_KIND(Usage, st.seed == o_.seed, "loader restore: state has seed ", st.seed, ", loader was opened with ",
                    o_.seed);
    MRMF_CHECK_KIND(Usage, st.batch >= 0 && st.batch <= batches_, "loader restore: batch ", st.batch,
                    " outside the epoch of ", batches_, " batches");
    begin(st.epoch, st.batch);
  }
  const std::vector<int64_t>& shard_ids() const override { return src_->ids; }

 private:
  Shape in_shape(int64_t n) const {
    std::vector<int64_t> d{n};
    d.insert(d.end(), src_->raw.begin(), src_->raw.end());
    return Shape(d);
  }
  Shape batch_shape() const {
    std::vector<int64_t> d{o_.batch_size};
    const auto s = sample_shape_.vec();
    d.insert(d.end(), s.begin(), s.end());
    return Shape(d);
  }

  void begin(int64_t epoch, int64_t batch) {
    cancel_inflight();
    epoch_ = epoch;
    const int64_t n = src_->count();
    if (o_.shuffle) {
      order_ = epoch_permutation(n, o_.seed, epoch, o_.rank);
    } else {
      order_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
    }
    next_batch_ = scheduled_ = batch;
    wait_ = 0;
    started_ = true;
    fill();
  }

  void fill() {
    if (o_.prefetch_depth <= 0) return;
    while (static_cast<int>(inflight_.size()) < o_.prefetch_depth && scheduled_ < batches_) {
      const int64_t b = scheduled_++;
      auto cancel = cancel_;
      inflight_.push_back(IoThread::instance().submit([this, b, cancel]() -> Produced {
        if (cancel->load()) return Produced{};
        omp_set_num_threads(o_.io_threads > 0 ? o_.io_threads : omp_get_num_procs());
        return produce(b);
      }));
    }
  }

  // Stops the epoch's prefetching: later jobs see the flag and return at
  // once, the running one finishes; pinned slots come back.
  void cancel_inflight() {
    cancel_->store(true);
    for (auto& f : inflight_) {
      try {
        Produced p = f.get();
        release_slot(p.slot);
      } catch (...) {  // an error of a batch nobody will use
      }
    }
    inflight_.clear();
    cancel_ = std::make_shared<std::atomic<bool>>(false);
  }

  int acquire_slot() {
    std::lock_guard<std::mutex> l(slot_mu_);
    MRMF_CHECK(!free_slots_.empty(), "loader: no free pinned staging buffer");
    const int s = free_slots_.front();
    free_slots_.pop_front();
    return s;
  }
  void release_slot(int s) {
    if (s < 0) return;
    std::lock_guard<std::mutex> l(slot_mu_);
    free_slots_.push_back(s);
  }

  // Batch b of the current epoch (I/O thread, or the caller when synchronous).
  Produced produce(int64_t b) {
    Source& s = *src_;
    const int64_t B = o_.batch_size, P = s.params;
    const bool cuda = o_.device.is_cuda();
    Produced p;
    if (cuda) {
      p.slot = acquire_slot();
      p.x = slot_x_[static_cast<size_t>(p.slot)];
      p.y = slot_y_[static_cast<size_t>(p.slot)];
    } else {
      p.x = Tensor::empty(batch_shape(), DType::F32);
      p.y = Tensor::empty({B, P}, DType::F32);
    }
    if (cache_on_ && cache_.empty()) {
      cache_.resize(static_cast<size_t>(s.count() * cache_sample_bytes_));
      cached_.assign(static_cast<size_t>(s.count()), 0);
    }
    Stream cpu;  // the CPU "stream" (a placeholder) for the per-sample kernel calls
    const int64_t rb = s.raw_bytes();
    if (!cuda && !s.raw_ptr(0)) staging_.resize(static_cast<size_t>(rb));
    for (int64_t j = 0; j < B; ++j) {
      const int64_t i = order_[static_cast<size_t>(b * B + j)];
      std::memcpy(p.y.data<float>() + j * P, s.labels.data<float>() + i * P, static_cast<size_t>(P) * 4);
      char* dst = static_cast<char*>(p.x.raw_data()) + j * (cuda ? rb : out_elems_ * 4);
      char* cached = cache_on_ ? cache_.data() + i * cache_sample_bytes_ : nullptr;
      if (cached && cached_[static_cast<size_t>(i)]) {
        std::memcpy(dst, cached, static_cast<size_t>(cache_sample_bytes_));
        continue;
      }
      if (cuda) {  // raw bytes for the device-side reduction
        s.read_raw(i, dst);
      } else {
        const void* raw = s.raw_ptr(i);
        if (!raw) {
          s.read_raw(i, staging_.data());
          raw = staging_.data();
        }
        const Tensor in = Tensor::from_blob(const_cast<void*>(raw), in_shape(1), s.dtype);
        std::vector<int64_t> od{1};
        const auto ss = sample_shape_.vec();
        od.insert(od.end(), ss.begin(), ss.end());
        kernels::fused_downsample(cpu, in, std::vector<Tensor>{Tensor::from_blob(dst, Shape(od), DType::F32)},
                                  spec_);
      }
      if (cached) {
        std::memcpy(cached, dst, static_cast<size_t>(cache_sample_bytes_));
        cached_[static_cast<size_t>(i)] = 1;
      }
    }
    return p;
  }

  LoaderOptions o_;
  std::unique_ptr<Source> src_;
  kernels::FusedDownsampleSpec spec_;
  Shape sample_shape_;
  int64_t out_elems_ = 0, batches_ = 0;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0, next_batch_ = 0, scheduled_ = 0;
  bool started_ = false;
  double wait_ = 0;
  std::deque<std::future<Produced>> inflight_;
  std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
  // cache (touched by produce() only: one job at a time)
  bool cache_on_ = false;
  int64_t cache_sample_bytes_ = 0;
  std::vector<char> cache_, staging_;
  std::vector<uint8_t> cached_;
  // CUDA path
  Stream stream_;
  std::vector<Tensor> slot_x_, slot_y_;
  std::deque<int> free_slots_;
  std::mutex slot_mu_;
  Tensor dev_raw_;
};

}  // namespace

std::unique_ptr<Loader> open_loader(const DataSpec& spec, LoaderOptions opts) {
  MRMF_CHECK_KIND(Usage, opts.batch_size >= 1, "loader: batch size must be >= 1, got ", opts.batch_size);
  MRMF_CHECK_KIND(Usage, opts.world >= 1 && opts.rank >= 0 && opts.rank < opts.world, "loader: rank ", opts.rank,
                  " outside a world of ", opts.world);
  MRMF_CHECK_KIND(Usage, !spec.path.empty(), "loader: no data path given");
  std::lock_guard<std::recursive_mutex> h(hdf5_mutex());  // the I/O thread may be serving another loader
  std::unique_ptr<Source> src;
  switch (spec.format) {
    case DataFormat::NeuronInverter: src = std::make_unique<NiSource>(spec, opts); break;
    case DataFormat::CosmoFlow: src = std::make_unique<CosmoSource>(spec, opts); break;
    case DataFormat::CosmoFlowLbann: src = std::make_unique<LbannSource>(spec, opts); break;
  }
  return std::make_unique<LoaderImpl>(std::move(src), opts);
}

Shape dataset_sample_shape(const DataSpec& spec) {
  std::lock_guard<std::recursive_mutex> lk(hdf5_mutex());
  switch (spec.format) {
    case DataFormat::NeuronInverter: {
      const auto f = NeuronInverterFile::open(spec.path, {spec.split});
      const auto& i = f.info(spec.split);
      return Shape{i.c, i.t};
    }
    case DataFormat::CosmoFlow: {
      const auto f = CosmoFlowFiles::open(cosmo_paths(spec));
      const auto d = f.dims();
      return Shape{f.channels(), d[0], d[1], d[2]};
    }
    case DataFormat::CosmoFlowLbann: {
      const auto f = CosmoFlowLbannFiles::open(cosmo_paths(spec));
      const auto d = f.dims();
      return Shape{4, d[0], d[1], d[2]};
    }
  }
  MRMF_THROW(Usage, "unknown data format");
}

}  // namespace mrmf::data
