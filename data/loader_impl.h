// The loader behind open_loader() (data/loader.h), shared by its two
// translation units: data/loader.cpp (set-up, the epochs' sample orders, the
// prefetch queue, next()) and data/loader_batches.cpp (making a batch: reads,
// the cache, conversion, chunks made from RAM, device copies). Internal:
// users include data/loader.h.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/device.h"
#include "data/cache_budget.h"
#include "data/chunked_work.h"
#include "data/loader.h"
#include "data/loader_sources.h"
#include "data/prefetch.h"
#include "kernels/fused_downsample_ops.h"

namespace mrmf::data::detail {

using Order = std::shared_ptr<const std::vector<int64_t>>;

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
  LoaderImpl(std::unique_ptr<Source> src, const LoaderOptions& o);
  ~LoaderImpl() override;

  void start_epoch(int64_t epoch) override { begin(epoch, 0); }
  bool next(LoaderBatch& out) override;
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

  // The set-up that needs no HDF5 call, run by open_loader() after it has
  // released the process-wide HDF5 lock.
  void finish_setup();

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

  // Set-up, the epoch's schedule and the prefetch queue (data/loader.cpp).
  void convert_in_place();
  int64_t key_of(int64_t epoch) const { return o_.shuffle ? epoch : 0; }
  Order order_of(int64_t epoch);
  void begin(int64_t epoch, int64_t batch);
  void fill();
  void drop(std::deque<Job>& jobs);
  int acquire_slot();
  void release_slot(int s);

  // Making a batch (data/loader_batches.cpp).
  Produced produce(const std::vector<int64_t>& order, int64_t b, WorkOffer* offer = nullptr);
  void to_ring(Produced& p);
  void upload(const Produced& p, Stream& s, Tensor& raw, Tensor x, Tensor y);
  Produced produce_host(const std::vector<int64_t>& order, int64_t b, int slot, WorkOffer* offer);
  template <class One>
  void from_ram(const std::vector<int64_t>& order, int64_t b, char* xb, WorkOffer* offer, int64_t ob, const One& one);
  const char* cached_sample(int64_t i) const;
  const char* ram_bytes(int64_t i) const;
  const char* decoded(int64_t i, std::vector<char>& scratch);
  void prefetch_sample(int64_t i) const;
  bool from_cache(int64_t i, char* dst) const;
  void to_cache(int64_t i, const char* src);
  void convert(const void* raw, int64_t i, char* dst);

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
  bool cache_raw_ = false;           // the cache holds stored bytes (see the constructor)
  bool raw_cache_host_ = false;      // ... which the host's kernel converts every epoch (produce())
  bool convert_pending_ = false;     // finish_setup() converts the preloaded shard
  bool converted_in_place_ = false;  // a preloaded shard already holds the float32 samples
  int64_t cache_sample_bytes_ = 0;
  std::unique_ptr<char[]> cache_;
  CacheReservation cache_reservation_;  // this loader's share of the process's cache budget
  std::vector<uint8_t> cached_;
  std::vector<char> staging_[kMaxIoThreads];         // raw samples of a streamed source (CPU)
  std::vector<std::unique_ptr<Worker>> converters_;  // io_threads - 1 of them on the CPU
  // CUDA path
  bool dev_reduce_ = false;  // raw samples to the device, reduced there
  Stream stream_;
  std::vector<Tensor> slot_x_, slot_y_;
  std::deque<int> free_slots_;
  std::mutex slot_mu_;
  Tensor dev_raw_;
  Stream io_stream_;                     // overlap_h2d: the I/O thread's copies and reductions
  Tensor io_raw_;                        // ... and its raw batch on the device (reduce_on device)
  std::vector<Tensor> ring_x_, ring_y_;  // overlap_h2d: device batches, written by produce() when free
  size_t ring_next_ = 0;                 // where the search for a free slot starts (only produce() touches it)
};

}  // namespace mrmf::data::detail
