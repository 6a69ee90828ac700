// Loaders for the scientific data sets; see data/loader.h for the contract.
// The loader's set-up, the epochs' sample orders and the prefetch queue are
// here; making a batch is in data/loader_batches.cpp (the class they share:
// data/loader_impl.h), the sources (sharding, per-sample reads) in
// data/loader_sources.cpp.
#include "data/loader.h"

#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/spin_wait.h"
#include "data/h5file.h"
#include "data/loader_impl.h"
#include "data/shuffle.h"

namespace mrmf::data {

DataFormat parse_data_format(const std::string& s) {
  if (s == "neuron_inverter") return DataFormat::NeuronInverter;
  if (s == "cosmoflow") return DataFormat::CosmoFlow;
  if (s == "cosmoflow_lbann") return DataFormat::CosmoFlowLbann;
  MRMF_THROW(Usage, "unknown data format '", s, "' (expected neuron_inverter, cosmoflow or cosmoflow_lbann)");
}

ReduceOn parse_reduce_on(const std::string& s) {
  if (s == "auto") return ReduceOn::Auto;
  if (s == "host") return ReduceOn::Host;
  if (s == "device") return ReduceOn::Device;
  MRMF_THROW(Usage, "unknown reduce_on '", s, "' (expected auto, host or device)");
}

const char* data_format_name(DataFormat f) {
  switch (f) {
    case DataFormat::NeuronInverter: return "neuron_inverter";
    case DataFormat::CosmoFlow: return "cosmoflow";
    case DataFormat::CosmoFlowLbann: return "cosmoflow_lbann";
  }
  return "?";
}

namespace detail {

using Clock = std::chrono::steady_clock;

LoaderImpl::LoaderImpl(std::unique_ptr<Source> src, const LoaderOptions& o) : o_(o), src_(std::move(src)) {
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
  // Checked once here (the transform against the channels too) rather than
  // per sample in the I/O thread.
  plan_ = kernels::plan_fused_downsample(in_shape(1), s.dtype, spec_, "loader");
  out_elems_ = sample_shape_.numel();
  batches_ = s.common_batches;
  const bool cuda = o_.device.is_cuda();
  dev_reduce_ = cuda && o_.reduce_on != ReduceOn::Host;
  // What the cache keeps: the smaller of the stored bytes and the float32
  // samples the kernel makes of them. Reduced data (1/8 of a cube, half a
  // time series) is kept converted, so later epochs skip the reduction. A
  // full-resolution uint16 cube would double in float32; keeping its raw
  // bytes halves the cache, and converting from RAM is faster on the CPU
  // than copying the twice-as-large float32 sample (bench_data: 30 % vs
  // 38 % of a plain read for 64^3 cubes). A preloaded shard already is in
  // RAM, so it is only cached when converting makes it smaller; a GPU
  // that reduces on the device always gets raw bytes.
  const bool preloaded = s.raw_ptr(0) != nullptr;
  const int64_t converted = out_elems_ * 4;
  cache_raw_ = dev_reduce_ || (!preloaded && s.raw_bytes() < converted);
  const int64_t per_sample = cache_raw_ ? s.raw_bytes() : converted;
  const int64_t want = s.count() * per_sample;
  if (o_.cache_in_memory && !(preloaded && (dev_reduce_ || converted >= s.raw_bytes()))) {
    cache_on_ = (o_.cache_max_bytes <= 0 || want <= o_.cache_max_bytes) && cache_reservation_.reserve(want);
    raw_cache_host_ = cache_on_ && cache_raw_ && !dev_reduce_;
    log::debug("data cache: {} for {} ({} samples, {:.0f} MB as {}; {:.0f} of {:.0f} MB of the budget in use)",
               cache_on_ ? "on" : "off", s.file, s.count(), want / 1e6, cache_raw_ ? "stored bytes" : "float32",
               cache_in_use() / 1e6, cache_budget() / 1e6);
    if (!cache_on_)
      log::info(
          "data cache: this rank's shard of {} ({:.0f} MB) does not fit the process's cache budget ({:.0f} of "
          "{:.0f} MB in use); it is read again every epoch (data.cache_max_mb sets the budget)",
          s.file, want / 1e6, cache_in_use() / 1e6, cache_budget() / 1e6);
  }
  cache_sample_bytes_ = per_sample;
  // A preloaded float32 shard at full resolution converts to samples of
  // its own size: converted once, in place (finish_setup(), after the
  // HDF5 lock is released), so that every batch is a plain gather (a
  // Neuron Inverter sample's (T, C) -> (C, T) transpose per batch costs
  // ~1.7x a copy of it). The source's bytes are then the float32 samples;
  // nothing else reads them (the device reduction, which would, is excluded).
  convert_pending_ =
      !dev_reduce_ && preloaded && s.dtype == DType::F32 && converted == s.raw_bytes() && src_->mutable_raw_ptr(0);
  if (cuda) {  // pinned staging: raw samples (reduced on the device) or reduced float32 ones
    stream_ = Stream::create(o_.device);
    for (int i = 0; i <= std::max(o_.prefetch_depth, 0); ++i) {
      slot_x_.push_back(dev_reduce_ ? Tensor::empty(in_shape(o_.batch_size), s.dtype, Device::cpu(), true)
                                    : Tensor::empty(batch_shape(), DType::F32, Device::cpu(), true));
      slot_y_.push_back(Tensor::empty({o_.batch_size, s.params}, DType::F32, Device::cpu(), true));
      free_slots_.push_back(i);
    }
    if (dev_reduce_) dev_raw_ = Tensor::empty(in_shape(o_.batch_size), s.dtype, o_.device);
    // The device batches of overlap_h2d: allocated once and owned here --
    // the caching allocator is not stream-aware, so a block the trainer
    // freed mid-step (still read by its queued kernels) must never be
    // handed to this thread's copies. A slot is written only when nobody
    // else holds it (to_ring()); as with any tensor, a caller releases a
    // batch only once its GPU work on it is done (the trainer synchronizes
    // every step). Depth + 2: the queued batches, the one in use, and the
    // one before it, which the trainer's LoaderBatch still holds.
    if (o_.overlap_h2d && o_.prefetch_depth > 0) {
      // Its own stream and raw buffer: next() may still copy a batch that
      // found no free slot, on stream_ through dev_raw_, meanwhile.
      io_stream_ = Stream::create(o_.device);
      if (dev_reduce_) io_raw_ = Tensor::empty(in_shape(o_.batch_size), s.dtype, o_.device);
      for (int i = 0; i < o_.prefetch_depth + 2; ++i) {
        ring_x_.push_back(Tensor::empty(batch_shape(), DType::F32, o_.device));
        ring_y_.push_back(Tensor::empty({o_.batch_size, s.params}, DType::F32, o_.device));
      }
    }
  }
  if (!dev_reduce_ && o_.prefetch_depth > 0)
    for (int k = 1; k < o_.io_threads; ++k) converters_.push_back(std::make_unique<Worker>());
}

LoaderImpl::~LoaderImpl() {
  drop(inflight_);
  std::lock_guard<std::recursive_mutex> h(hdf5_mutex());  // HDF5 handles close under the lock
  src_.reset();
}

// The set-up that needs no HDF5 call, run by open_loader() after it has
// released the process-wide HDF5 lock: converting a large preloaded shard
// takes seconds, and holding the lock meanwhile would stall the shared I/O
// thread serving every other loader of the process.
void LoaderImpl::finish_setup() {
  if (convert_pending_) convert_in_place();
  convert_pending_ = false;
}

void LoaderImpl::convert_in_place() {
  Source& s = *src_;
  const int64_t n = s.count(), bytes = s.raw_bytes(), floats = bytes / 4;
  // One sample of scratch per thread, allocated before the parallel region
  // (nothing in it can throw: an exception escaping it would terminate).
  const int threads = omp_get_max_threads();
  std::vector<float> scratch(static_cast<size_t>(threads * floats));
#pragma omp parallel num_threads(threads)
  {
    kernels::FusedOutputs y;
    y.y[0] = scratch.data() + omp_get_thread_num() * floats;
    Stream cpu;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      kernels::run_fused_downsample(cpu, plan_, s.raw_ptr(i), y);
      std::memcpy(s.mutable_raw_ptr(i), y.y[0], static_cast<size_t>(bytes));
    }
  }
  converted_in_place_ = true;
}

bool LoaderImpl::next(LoaderBatch& out) {
  if (!started_) begin(0, 0);
  if (next_batch_ >= batches_) return false;
  const auto t0 = Clock::now();
  Produced p;
  if (o_.prefetch_depth <= 0) {
    try {
      p = produce(*order_, next_batch_);  // the sources lock HDF5 for their reads
    } catch (...) {
      // The batch is lost, as with prefetching (below): not read again by
      // the next call.
      wait_ += std::chrono::duration<double>(Clock::now() - t0).count();
      ++next_batch_;
      throw;
    }
  } else {
    MRMF_CHECK(!inflight_.empty() && inflight_.front().key == key_ && inflight_.front().batch == next_batch_,
               "loader: prefetch queue out of step with batch ", next_batch_);
    std::future<Produced> f = std::move(inflight_.front().result);
    const std::shared_ptr<WorkOffer> offer = std::move(inflight_.front().offer);
    inflight_.pop_front();
    try {
      // A batch made from RAM that is not done yet: this thread's OpenMP
      // team, idle until it is, takes the chunks left (data/chunked_work.h)
      // -- less one thread for the I/O thread and each converter, which
      // work on them too and each need a core (presumably because a
      // chunk's thread descheduled holds up the whole batch for a time
      // slice). A whole team of 2 beside the I/O thread on 2 cores gave
      // 71-80 % of a plain read instead of 91-96 %, and on the H200 host's
      // 16 cores 15 helpers beside 2-4 loader threads gave 145-161 %
      // against 376 % with the I/O thread alone
      // (bench/results/gpu_2026-11-27d.md).
      if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        if (const auto w = offer->await()) w->help_all(helpers());
      // The I/O thread is finishing the batch (its last chunk, its return):
      // spin briefly rather than sleep for it (core/spin_wait.h).
      spin_until([&] { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
      p = f.get();  // re-throws an I/O-thread error with its message
    } catch (...) {
      // The batch is lost; keep the indices of the following ones right.
      // A job this thread failed to help (await or the team threw) still
      // runs and uses this loader: wait for it and take back its slot.
      if (f.valid()) {
        try {
          release_slot(f.get().slot);
        } catch (...) {  // the job's own error: this batch is lost already
        }
      }
      wait_ += std::chrono::duration<double>(Clock::now() - t0).count();
      ++next_batch_;
      fill();
      throw;
    }
    try {
      fill();  // keep the I/O thread busy while this batch is finished and used
    } catch (...) {
      // The next batches could not be queued (out of memory): this batch is
      // lost like a failed one, and its pinned slot comes back -- only
      // depth + 1 exist.
      release_slot(p.slot);
      wait_ += std::chrono::duration<double>(Clock::now() - t0).count();
      ++next_batch_;
      throw;
    }
  }
  if (o_.device.is_cuda() && !p.x.device().is_cuda()) {  // not copied by the I/O thread (overlap_h2d)
    Tensor x, y;
    try {
      x = Tensor::empty(batch_shape(), DType::F32, o_.device);
      y = Tensor::empty({o_.batch_size, src_->params}, DType::F32, o_.device);
      upload(p, stream_, dev_raw_, x, y);
    } catch (...) {
      // Device memory or a copy failed: the batch is lost, as above, but
      // its pinned slot must come back (only depth + 1 exist: without it
      // the I/O thread finds none for later batches), once no copy still
      // reads it; the prefetch queue has moved on to the next batch.
      try {
        stream_.synchronize();
      } catch (...) {  // the error that brought us here is the one to report
      }
      release_slot(p.slot);
      wait_ += std::chrono::duration<double>(Clock::now() - t0).count();
      ++next_batch_;
      throw;
    }
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

// The sample order of `epoch`; the last two are kept (current and next epoch).
Order LoaderImpl::order_of(int64_t epoch) {
  const int64_t key = key_of(epoch);
  for (auto& [k, ord] : orders_)
    if (k == key && ord) return ord;
  const int64_t n = src_->count();
  std::vector<int64_t> v;
  if (o_.shuffle) {
    v = epoch_permutation(n, o_.seed, epoch, o_.rank);
  } else {
    v.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  }
  orders_[1] = orders_[0];
  orders_[0] = {key, std::make_shared<const std::vector<int64_t>>(std::move(v))};
  return orders_[0].second;
}

// Makes batch `batch` of `epoch` the next one. Prefetched jobs that are
// exactly the batches now due (same order, consecutive from `batch`) are
// kept -- this is how the next epoch's batches, produced while the last
// one was being used, are taken over -- every other job is cancelled.
void LoaderImpl::begin(int64_t epoch, int64_t batch) {
  const int64_t key = key_of(epoch);
  std::deque<Job> keep, gone;
  bool run_over = false;  // the kept jobs are one consecutive run of the queue
  for (Job& j : inflight_) {
    if (!run_over && j.key == key && j.batch == batch + static_cast<int64_t>(keep.size())) {
      keep.push_back(std::move(j));
    } else {
      run_over = !keep.empty();
      gone.push_back(std::move(j));
    }
  }
  inflight_.clear();
  drop(gone);
  inflight_ = std::move(keep);
  // A repeated epoch (validation restarts epoch 0; time_steps() epoch 0)
  // predicts that the same one follows again, otherwise the next one.
  step_ = started_ && epoch == epoch_ ? 0 : 1;
  epoch_ = epoch;
  key_ = key;
  order_ = order_of(epoch);
  next_batch_ = batch;
  sched_ = {epoch, key, batch + static_cast<int64_t>(inflight_.size()), order_};
  ahead_ = false;
  wait_ = 0;
  started_ = true;
  fill();
}

// Schedules up to prefetch_depth batches: the rest of this epoch, then --
// when opts.prefetch_next_epoch -- the first batches of the epoch that is
// expected to follow, so that its first next() does not wait for I/O.
void LoaderImpl::fill() {
  if (o_.prefetch_depth <= 0) return;
  while (static_cast<int>(inflight_.size()) < o_.prefetch_depth) {
    if (sched_.batch >= batches_) {
      if (ahead_ || !o_.prefetch_next_epoch) break;
      ahead_ = true;
      const int64_t e = epoch_ + step_;
      sched_ = {e, key_of(e), 0, order_of(e)};
      continue;
    }
    // The job is queued before it is submitted and the schedule moves on
    // after: a throw on the way (out of memory) leaves neither a gap in the
    // queue (every later next() out of step) nor a running job that no
    // future waits for (it uses this loader: drop() must see it).
    Job& j = inflight_.emplace_back();
    try {
      j.key = sched_.key;
      j.batch = sched_.batch;
      j.cancel = std::make_shared<std::atomic<bool>>(false);
      j.offer = std::make_shared<WorkOffer>();
      auto cancel = j.cancel;
      auto offer = j.offer;
      Order order = sched_.order;
      const int64_t b = j.batch;
      j.result = IoThread::instance().submit([this, b, cancel, offer, order]() -> Produced {
        struct Finish {  // next() may be waiting for an offer: every way out says there is none (more)
          WorkOffer& o;
          ~Finish() { o.finish(); }
        } finish{*offer};
        if (cancel->load()) return Produced{};
        return produce(*order, b, offer.get());
      });
    } catch (...) {
      inflight_.pop_back();
      throw;
    }
    ++sched_.batch;
  }
}

// Cancels jobs: those not started return at once, a running one finishes;
// pinned slots come back.
void LoaderImpl::drop(std::deque<Job>& jobs) {
  for (auto& j : jobs) j.cancel->store(true);
  for (auto& j : jobs) {
    try {
      Produced p = j.result.get();
      release_slot(p.slot);
    } catch (...) {  // an error of a batch nobody will use
    }
  }
  jobs.clear();
}

int LoaderImpl::acquire_slot() {
  std::lock_guard<std::mutex> l(slot_mu_);
  MRMF_CHECK(!free_slots_.empty(), "loader: no free pinned staging buffer");
  const int s = free_slots_.front();
  free_slots_.pop_front();
  return s;
}

void LoaderImpl::release_slot(int s) {
  if (s < 0) return;
  std::lock_guard<std::mutex> l(slot_mu_);
  free_slots_.push_back(s);
}

}  // namespace detail

using detail::LoaderImpl;

namespace {
void check_options(const DataSpec& spec, const LoaderOptions& opts) {
  MRMF_CHECK_KIND(Usage, opts.batch_size >= 1, "loader: batch size must be >= 1, got ", opts.batch_size);
  MRMF_CHECK_KIND(Usage, opts.world >= 1 && opts.rank >= 0 && opts.rank < opts.world, "loader: rank ", opts.rank,
                  " outside a world of ", opts.world);
  MRMF_CHECK_KIND(Usage, !spec.path.empty(), "loader: no data path given");
  MRMF_CHECK_KIND(Usage, opts.io_threads >= 1 && opts.io_threads <= kMaxIoThreads, "loader: io_threads must be 1 to ",
                  kMaxIoThreads, ", got ", opts.io_threads);
  MRMF_CHECK_KIND(Usage, opts.device.is_cuda() || opts.reduce_on != ReduceOn::Device,
                  "loader: reduce_on 'device' needs a CUDA device, this loader's is ", opts.device.str());
}
}  // namespace

void check_loader(const DataSpec& spec, const LoaderOptions& opts) {
  check_options(spec, opts);
  std::lock_guard<std::recursive_mutex> h(hdf5_mutex());
  detail::check_source(spec, opts);
}

std::unique_ptr<Loader> open_loader(const DataSpec& spec, LoaderOptions opts) {
  check_options(spec, opts);
  std::unique_ptr<LoaderImpl> loader;
  {
    std::lock_guard<std::recursive_mutex> h(hdf5_mutex());  // the I/O thread may be serving another loader
    loader = std::make_unique<LoaderImpl>(detail::open_source(spec, opts), opts);
  }
  loader->finish_setup();  // if it throws, ~LoaderImpl closes the HDF5 handles under the lock
  return loader;
}

std::vector<std::string> cosmoflow_split_files(const DataSpec& spec) { return detail::cosmo_paths(spec); }

Shape dataset_sample_shape(const DataSpec& spec) {
  std::lock_guard<std::recursive_mutex> lk(hdf5_mutex());
  switch (spec.format) {
    case DataFormat::NeuronInverter: {
      const auto f = NeuronInverterFile::open(spec.path, {spec.split});
      const auto& i = f.info(spec.split);
      return Shape{i.c, i.t};
    }
    case DataFormat::CosmoFlow: {
      const auto f = CosmoFlowFiles::open(detail::cosmo_paths(spec));
      const auto d = f.dims();
      return Shape{f.channels(), d[0], d[1], d[2]};
    }
    case DataFormat::CosmoFlowLbann: {
      const auto f = CosmoFlowLbannFiles::open(detail::cosmo_paths(spec));
      const auto d = f.dims();
      return Shape{4, d[0], d[1], d[2]};
    }
  }
  MRMF_THROW(Usage, "unknown data format");
}

}  // namespace mrmf::data
