// Loaders for the scientific data sets; see data/loader.h for the contract.
// The sources (sharding, per-sample reads) are in data/loader_sources.cpp.
#include "data/loader.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/prefetch.h"
#include "core/spin_wait.h"
#include "data/cache_budget.h"
#include "data/chunked_work.h"
#include "data/h5file.h"
#include "data/loader_sources.h"
#include "data/prefetch.h"
#include "data/shuffle.h"
#include "kernels/fused_downsample_ops.h"

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

namespace {

using Clock = std::chrono::steady_clock;
using detail::Source;
using Order = std::shared_ptr<const std::vector<int64_t>>;

// ---------------------------------------------------------------- the loader
struct Produced {
  Tensor x, y;    // CPU device: final float32 batch; CUDA: pinned staging (raw, or reduced on the host) + labels
  int slot = -1;  // pinned slot to give back (CUDA path); with overlap_h2d, x and y may be on the device already
};

// One batch handed to the I/O thread. `key` names the sample order it was
// produced with: the epoch when shuffling, 0 otherwise (every epoch has the
// same order then, so a batch prefetched for one epoch serves any other).
struct Job {
  int64_t key = 0, batch = 0;
  std::shared_ptr<std::atomic<bool>> cancel;
  std::shared_ptr<WorkOffer> offer;  // where the job offers a batch made from RAM for next() to join
  std::future<Produced> result;
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
        log::info("data cache: this rank's shard of {} ({:.0f} MB) does not fit the process's cache budget ({:.0f} of "
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

  ~LoaderImpl() override {
    drop(inflight_);
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
      p = produce(*order_, next_batch_);  // the sources lock HDF5 for their reads
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
      fill();  // keep the I/O thread busy while this batch is finished and used
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
        if (o_.prefetch_depth > 0) ++next_batch_;
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

  int64_t batches_per_epoch() const override { return batches_; }
  int64_t batch_size() const override { return o_.batch_size; }
  int64_t local_samples() const override { return src_->count(); }
  bool caching() const override { return cache_on_ || src_->raw_ptr(0) != nullptr; }
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
  // The threads next() lends to a batch made from RAM: the caller's OpenMP
  // team less one core for the I/O thread and one per converter (see next()).
  int helpers() const { return std::max(1, omp_get_max_threads() - 1 - static_cast<int>(converters_.size())); }

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

  int64_t key_of(int64_t epoch) const { return o_.shuffle ? epoch : 0; }
  // The sample order of `epoch`; the last two are kept (current and next epoch).
  Order order_of(int64_t epoch) {
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
  void begin(int64_t epoch, int64_t batch) {
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
  void fill() {
    if (o_.prefetch_depth <= 0) return;
    while (static_cast<int>(inflight_.size()) < o_.prefetch_depth) {
      if (sched_.batch >= batches_) {
        if (ahead_ || !o_.prefetch_next_epoch) break;
        ahead_ = true;
        const int64_t e = epoch_ + step_;
        sched_ = {e, key_of(e), 0, order_of(e)};
        continue;
      }
      Job j;
      j.key = sched_.key;
      j.batch = sched_.batch++;
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
      inflight_.push_back(std::move(j));
    }
  }

  // Cancels jobs: those not started return at once, a running one finishes;
  // pinned slots come back.
  void drop(std::deque<Job>& jobs) {
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

  // Batch b of `order` (I/O thread, or the caller when synchronous); with
  // overlap_h2d on the device already, copied by the I/O thread while the
  // trainer computes the batches before it. `offer`: the I/O thread's job's
  // (null when synchronous).
  Produced produce(const std::vector<int64_t>& order, int64_t b, WorkOffer* offer = nullptr) {
    const int slot = o_.device.is_cuda() ? acquire_slot() : -1;
    Produced p;
    try {
      p = produce_host(order, b, slot, offer);
    } catch (...) {  // a failed read must not keep its pinned slot (next() goes on after errors)
      release_slot(slot);
      throw;
    }
    if (!ring_x_.empty()) to_ring(p);
    return p;
  }

  // The staged batch to a free ring slot on the I/O thread's stream (reduced
  // there when the device reduces), waited for here, in the I/O thread; the
  // pinned slot is free again at once. A slot is free when nobody else holds
  // its tensors: not a batch in the prefetch queue, not one the caller kept
  // (Loader's contract lets it keep batches). None free: the batch stays
  // staged and next() copies it, as without overlap_h2d.
  void to_ring(Produced& p) {
    const size_t n = ring_x_.size();
    size_t r = n;
    for (size_t k = 0; k < n && r == n; ++k) {
      const size_t c = (ring_next_ + k) % n;
      if (ring_x_[c].storage_holders() == 1 && ring_y_[c].storage_holders() == 1) r = c;
    }
    if (r == n) return;
    ring_next_ = (r + 1) % n;
    try {
      set_current_device(o_.device);  // this thread's current device (a rank may use cuda:N, N > 0)
      upload(p, io_stream_, io_raw_, ring_x_[r], ring_y_[r]);
      release_slot(p.slot);
      p.slot = -1;
      p.x = ring_x_[r];
      p.y = ring_y_[r];
    } catch (...) {
      // Copies queued before the error may still read the pinned slot.
      try {
        io_stream_.synchronize();
      } catch (...) {
      }
      release_slot(p.slot);
      throw;
    }
  }

  // A staged batch to the device batch x, y on `s`, waited for: raw samples
  // through the device buffer `raw` and reduced there, or the host-reduced
  // batch as it is.
  void upload(const Produced& p, Stream& s, Tensor& raw, Tensor x, Tensor y) {
    if (dev_reduce_) {
      raw.copy_from(p.x, s);
      kernels::fused_downsample(s, raw, std::vector<Tensor>{x}, spec_);
    } else {
      x.copy_from(p.x, s);
    }
    y.copy_from(p.y, s);
    s.synchronize();
  }

  // `slot`: the pinned staging slot (CUDA), acquired and released on error by produce().
  Produced produce_host(const std::vector<int64_t>& order, int64_t b, int slot, WorkOffer* offer) {
    Source& s = *src_;
    const int64_t B = o_.batch_size, P = s.params;
    const bool cuda = o_.device.is_cuda();
    Produced p;
    if (cuda) {
      p.slot = slot;
      p.x = slot_x_[static_cast<size_t>(p.slot)];
      p.y = slot_y_[static_cast<size_t>(p.slot)];
    } else {
      p.x = Tensor::empty(batch_shape(), DType::F32);  // large blocks come from the host cache
      p.y = Tensor::empty({B, P}, DType::F32);
    }
    if (cache_on_ && !cache_) {
      // Not zero-filled: the OS commits the pages as samples arrive.
      cache_.reset(new char[static_cast<size_t>(s.count() * cache_sample_bytes_)]);
      cached_.assign(static_cast<size_t>(s.count()), 0);
    }
    const auto sample = [&](int64_t j) { return order[static_cast<size_t>(b * B + j)]; };
    for (int64_t j = 0; j < B; ++j)
      std::memcpy(p.y.data<float>() + j * P, s.labels.data<float>() + sample(j) * P, static_cast<size_t>(P) * 4);
    const int64_t rb = s.raw_bytes(), ob = dev_reduce_ ? rb : out_elems_ * 4;
    char* const xb = static_cast<char*>(p.x.raw_data());
    const bool preloaded = s.raw_ptr(0) != nullptr;
    // A batch whose samples are all in RAM -- a preloaded shard, a mapped
    // one (chunks to decode or put together included: each thread does its
    // own), or a cached one's later epochs -- is made in chunks that any
    // thread may claim (from_ram()): this one, the converters, and the
    // caller's OpenMP team once it waits for the batch in next()
    // (synchronous: it makes it). So are the device's raw batches from RAM:
    // a compressed 128^3 batch inflated on this thread alone would hold up
    // the device.
    std::vector<int64_t> in_ram;
    if (!preloaded && !s.decodes_in_ram() && raw_cache_host_)
      for (int64_t j = 0; j < B; ++j)
        if (cached_[static_cast<size_t>(sample(j))]) in_ram.push_back(j);
    bool all_in_ram = preloaded || s.decodes_in_ram() || static_cast<int64_t>(in_ram.size()) == B;
    if (!all_in_ram && cache_on_ && !raw_cache_host_) {  // every sample in the cache (float32; raw for the device)?
      all_in_ram = true;
      for (int64_t j = 0; j < B && all_in_ram; ++j) all_in_ram = cached_sample(sample(j)) != nullptr;
    }
    if (dev_reduce_) {  // raw bytes for the device-side reduction
      const auto raw_sample = [this](int64_t i, char* dst, std::vector<char>&) {
        if (!from_cache(i, dst)) {
          src_->read_raw(i, dst);
          to_cache(i, dst);
        }
      };
      if (all_in_ram) {
        from_ram(order, b, xb, offer, ob, raw_sample);
        return p;
      }
      std::vector<char> unused;  // one by one here: HDF5 reads
      for (int64_t j = 0; j < B; ++j) raw_sample(sample(j), xb + j * ob, unused);
      return p;
    }
    if (all_in_ram) {
      from_ram(order, b, xb, offer, ob, [this, ob](int64_t i, char* dst, std::vector<char>& scratch) {
        if (converted_in_place_ || cached_sample(i)) {
          std::memcpy(dst, ram_bytes(i), static_cast<size_t>(ob));
        } else if (const char* raw = ram_bytes(i)) {
          src_->check_ram_sample(i);  // a mapped sample on its first read; others were checked when read
          convert(raw, i, dst);
        } else {
          convert(decoded(i, scratch), i, dst);
        }
      });
      return p;
    }
    // M converter threads (io_threads - 1) beside this one. Without them
    // everything runs here. With them, a batch's raw samples in the cache
    // are converted in M + 1 equal parts, one here, and samples to be read
    // form a pipeline -- this thread reads sample k + 1 (HDF5 stays on the
    // I/O thread) while the converters turn the samples before it into
    // float32, sample k on converter k mod M, over M + 1 staging buffers.
    // (This thread converting too whenever the converters were busy gained
    // only ~10 % with M = 1: it then leaves the converter idle while it
    // converts; not kept.) Alone, a sample is converted right after its read
    // while it is still in cache (a whole staged batch would go to memory
    // and back first). Declared before the futures: Drain waits for the jobs
    // using them (a converter's job reads them when it starts, maybe after
    // this thread is done with its part).
    const size_t M = converters_.size(), stages = M + 1;
    for (size_t k = 0; k < stages; ++k) staging_[k].resize(static_cast<size_t>(rb));
    const auto part = [&](size_t n, size_t k) { return n * k / stages; };  // [part(k), part(k + 1)): part k
    const auto convert_in_ram = [&](size_t lo, size_t hi) {
      for (size_t q = lo; q < hi; ++q) {
        const int64_t j = in_ram[q], i = sample(j);
        convert(cache_.get() + i * cache_sample_bytes_, i, xb + j * ob);
      }
    };
    // pending[0, stages): conversions of the staging buffers; then one per
    // converter's part of in_ram.
    std::vector<std::future<void>> pending(stages + M);
    struct Drain {  // a read that throws must not unwind under running conversions
      std::vector<std::future<void>>& f;
      ~Drain() {
        for (auto& x : f)
          if (x.valid()) x.wait();
      }
    } drain{pending};
    // Parts 1..M of in_ram to the converters; part 0 is this thread's. The
    // jobs capture their ranges by value: they may start after this call
    // has returned (only convert_in_ram must outlive them -- Drain sees to that).
    for (size_t k = 1; k <= M; ++k) {
      const size_t lo = part(in_ram.size(), k), hi = part(in_ram.size(), k + 1);
      if (lo < hi)
        pending[stages + k - 1] = converters_[k - 1]->submit([&convert_in_ram, lo, hi] { convert_in_ram(lo, hi); });
    }
    size_t reads = 0;
    for (int64_t j = 0; j < B; ++j) {
      const int64_t i = sample(j);
      if (raw_cache_host_ && cached_[static_cast<size_t>(i)]) continue;  // in_ram
      if (from_cache(i, xb + j * ob)) continue;
      const size_t k = reads % stages;
      if (pending[k].valid()) pending[k].get();  // its staging buffer is free again
      // Raw bytes kept in the cache: read straight into their slot once,
      // converted from there every epoch.
      char* raw = raw_cache_host_ ? cache_.get() + i * cache_sample_bytes_ : staging_[k].data();
      s.read_raw(i, raw);
      if (M > 0)
        pending[k] = converters_[reads % M]->submit([this, raw, i, dst = xb + j * ob] { convert(raw, i, dst); });
      else
        convert(raw, i, xb + j * ob);
      ++reads;
    }
    convert_in_ram(0, part(in_ram.size(), 1));
    // Marked cached only now: in_ram was fixed before this batch's reads.
    if (raw_cache_host_)
      for (int64_t j = 0; j < B; ++j) cached_[static_cast<size_t>(sample(j))] = 1;
    for (auto& f : pending)
      if (f.valid()) f.get();
    return p;
  }

  // Batch b of `order`, every sample of which is in RAM, into xb: chunks of
  // samples (~opts.chunk_bytes of output each) claimed by this thread, the
  // converters, and -- through `offer` -- the caller waiting in next(); or,
  // synchronous (no offer), by the caller's OpenMP team, idle meanwhile.
  // One core alone cannot keep a shuffled gather from RAM at a sequential
  // read's speed (74 % of it on the 2-core VM; bench/results/cpu_data_2026-11-27c.txt).
  // Each sample is written, and its cache entry filled, by one thread only:
  // `one(i, dst, scratch)` makes sample i's `ob` bytes at dst (float32 on
  // the host's kernel path, raw ones for the device's), `scratch` a buffer
  // of the chunk's for a sample that must be decoded first.
  template <class One>
  void from_ram(const std::vector<int64_t>& order, int64_t b, char* xb, WorkOffer* offer, int64_t ob, const One& one) {
    const int64_t B = o_.batch_size;
    const int64_t per = std::max<int64_t>(1, o_.chunk_bytes / ob), chunks = (B + per - 1) / per;
    const auto sample = [&](int64_t j) { return order[static_cast<size_t>(b * B + j)]; };
    auto work = std::make_shared<ChunkedWork>(chunks, [&, per](int64_t c) {
      if (o_.on_chunk) o_.on_chunk(b, c);
      const int64_t lo = c * per, hi = std::min(B, lo + per);
      std::vector<char> scratch;  // a sample to be decoded, when there is one: freed with the chunk
      for (int64_t j = lo; j < hi; ++j) {
        if (j + 1 < hi) prefetch_sample(sample(j + 1));  // while this one is copied
        one(sample(j), xb + j * ob, scratch);
      }
    });
    if (!offer) {
      work->help_all();
    } else {
      offer->offer(work);
      // The converters are optional helpers: one that cannot be asked (no
      // memory for its task) leaves its share to the others, and this frame,
      // which the chunks use, must not unwind while any of them runs.
      for (auto& c : converters_) {
        try {
          c->submit([work] { work->help(); });  // nothing left to claim: returns at once
        } catch (...) {  // left to the others
        }
      }
      work->help();
    }
    work->wait();  // chunks others are still running: `work`'s captures (this frame) outlive them
  }

 public:
  // The set-up that needs no HDF5 call, run by open_loader() after it has
  // released the process-wide HDF5 lock: converting a large preloaded shard
  // takes seconds, and holding the lock meanwhile would stall the shared I/O
  // thread serving every other loader of the process.
  void finish_setup() {
    if (convert_pending_) convert_in_place();
    convert_pending_ = false;
  }

 private:
  void convert_in_place() {
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

  // Sample i's converted bytes (raw bytes when the device reduces them) in
  // the in-memory cache, or null; raw bytes kept for the host's kernel are
  // converted by produce() instead and do not count.
  const char* cached_sample(int64_t i) const {
    if (!cache_on_ || raw_cache_host_ || !cached_[static_cast<size_t>(i)]) return nullptr;
    return cache_.get() + i * cache_sample_bytes_;
  }
  // Sample i's bytes in RAM, as a batch made from RAM reads them: the
  // float32 cache, the raw cache, or the preloaded shard (converted in
  // place, or raw); null for a sample still to be decoded (decoded()).
  const char* ram_bytes(int64_t i) const {
    if (const char* c = cached_sample(i)) return c;
    if (raw_cache_host_ && cached_[static_cast<size_t>(i)]) return cache_.get() + i * cache_sample_bytes_;
    return static_cast<const char*>(src_->raw_ptr(i));
  }
  // Sample i of a source that decodes it (Source::decodes_in_ram), by the
  // calling thread: into its slot of the raw cache where that keeps it
  // (later epochs skip the decoding), else into `scratch` (a sample's size;
  // the caller's chunk frees it: per-thread buffers kept for the threads'
  // lives would hold a sample per helper thread of every rank).
  const char* decoded(int64_t i, std::vector<char>& scratch) {
    char* raw = nullptr;
    if (raw_cache_host_) {
      raw = cache_.get() + i * cache_sample_bytes_;
    } else {
      scratch.resize(static_cast<size_t>(src_->raw_bytes()));
      raw = scratch.data();
    }
    src_->read_raw(i, raw);
    if (raw_cache_host_) cached_[static_cast<size_t>(i)] = 1;  // this thread's sample alone
    return raw;
  }
  // Those bytes on their way into the caches (core/prefetch.h: in a
  // shuffled order the hardware prefetcher starts over at every sample).
  void prefetch_sample(int64_t i) const {
    if (const char* p = ram_bytes(i))
      prefetch_bytes(p, static_cast<size_t>(cached_sample(i) ? cache_sample_bytes_ : src_->raw_bytes()));
  }
  // Sample i from the in-memory cache into the batch; false if not cached.
  bool from_cache(int64_t i, char* dst) const {
    const char* c = cached_sample(i);
    if (c) std::memcpy(dst, c, static_cast<size_t>(cache_sample_bytes_));
    return c != nullptr;
  }
  void to_cache(int64_t i, const char* src) {
    if (!cache_on_ || raw_cache_host_) return;
    std::memcpy(cache_.get() + i * cache_sample_bytes_, src, static_cast<size_t>(cache_sample_bytes_));
    cached_[static_cast<size_t>(i)] = 1;  // distinct samples: no two threads share an entry
  }
  // Raw sample i -> float32 channels-first at dst (host side), then cached.
  void convert(const void* raw, int64_t i, char* dst) {
    // The plan was checked in the constructor: no per-sample checks,
    // allocations or (single-threaded) OpenMP region.
    kernels::FusedOutputs y;
    y.y[0] = reinterpret_cast<float*>(dst);
    kernels::run_fused_downsample(cpu_, plan_, raw, y);
    to_cache(i, dst);
  }

  struct Cursor {  // the next batch to schedule
    int64_t epoch = 0, key = 0, batch = 0;
    Order order;
  };

  LoaderOptions o_;
  std::unique_ptr<Source> src_;
  kernels::FusedDownsampleSpec spec_;
  kernels::FusedDownsamplePlan plan_;  // one sample
  Stream cpu_;                         // the CPU "stream" (a placeholder) for the kernel calls
  Shape sample_shape_;
  int64_t out_elems_ = 0, batches_ = 0;
  Order order_;
  std::pair<int64_t, Order> orders_[2];
  int64_t epoch_ = 0, key_ = 0, next_batch_ = 0, step_ = 1;
  Cursor sched_;
  bool ahead_ = false;  // the cursor has moved on to the following epoch
  bool started_ = false;
  double wait_ = 0;
  std::deque<Job> inflight_;  // in schedule order; the front one is batch next_batch_
  // cache (touched by produce() only, one job at a time, and by its chunks: each sample's entry by one thread)
  bool cache_on_ = false;
  bool cache_raw_ = false;  // the cache holds stored bytes (see the constructor)
  bool raw_cache_host_ = false;  // ... which the host's kernel converts every epoch (produce())
  bool convert_pending_ = false;     // finish_setup() converts the preloaded shard
  bool converted_in_place_ = false;  // a preloaded shard already holds the float32 samples
  int64_t cache_sample_bytes_ = 0;
  std::unique_ptr<char[]> cache_;
  CacheReservation cache_reservation_;  // this loader's share of the process's cache budget
  std::vector<uint8_t> cached_;
  std::vector<char> staging_[kMaxIoThreads];          // raw samples of a streamed source (CPU)
  std::vector<std::unique_ptr<Worker>> converters_;  // io_threads - 1 of them on the CPU
  // CUDA path
  bool dev_reduce_ = false;  // raw samples to the device, reduced there
  Stream stream_;
  std::vector<Tensor> slot_x_, slot_y_;
  std::deque<int> free_slots_;
  std::mutex slot_mu_;
  Tensor dev_raw_;
  Stream io_stream_;                      // overlap_h2d: the I/O thread's copies and reductions
  Tensor io_raw_;                         // ... and its raw batch on the device (reduce_on device)
  std::vector<Tensor> ring_x_, ring_y_;  // overlap_h2d: device batches, written by produce() when free
  size_t ring_next_ = 0;                 // where the search for a free slot starts (only produce() touches it)
};

}  // namespace

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
