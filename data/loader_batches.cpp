// Making a loader's batch (data/loader_impl.h): the labels, the samples read
// through the source (converted by the I/O thread and the converters in a
// pipeline), from the in-memory cache, or -- when all of them are in RAM --
// in chunks that any waiting thread may claim; then, on a GPU, the copies to
// the device (reduced there where the device reduces).
#include <cstring>

#include "core/error.h"
#include "core/prefetch.h"
#include "data/loader_impl.h"

namespace mrmf::data::detail {

// Batch b of `order` (I/O thread, or the caller when synchronous); with
// overlap_h2d on the device already, copied by the I/O thread while the
// trainer computes the batches before it. `offer`: the I/O thread's job's
// (null when synchronous).
Produced LoaderImpl::produce(const std::vector<int64_t>& order, int64_t b, WorkOffer* offer) {
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
void LoaderImpl::to_ring(Produced& p) {
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
void LoaderImpl::upload(const Produced& p, Stream& s, Tensor& raw, Tensor x, Tensor y) {
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
Produced LoaderImpl::produce_host(const std::vector<int64_t>& order, int64_t b, int slot, WorkOffer* offer) {
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
void LoaderImpl::from_ram(const std::vector<int64_t>& order, int64_t b, char* xb, WorkOffer* offer, int64_t ob,
                          const One& one) {
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
      } catch (...) {                         // left to the others
      }
    }
    work->help();
  }
  work->wait();  // chunks others are still running: `work`'s captures (this frame) outlive them
}

// Sample i's converted bytes (raw bytes when the device reduces them) in
// the in-memory cache, or null; raw bytes kept for the host's kernel are
// converted by produce() instead and do not count.
const char* LoaderImpl::cached_sample(int64_t i) const {
  if (!cache_on_ || raw_cache_host_ || !cached_[static_cast<size_t>(i)]) return nullptr;
  return cache_.get() + i * cache_sample_bytes_;
}

// Sample i's bytes in RAM, as a batch made from RAM reads them: the
// float32 cache, the raw cache, or the preloaded shard (converted in
// place, or raw); null for a sample still to be decoded (decoded()).
const char* LoaderImpl::ram_bytes(int64_t i) const {
  if (const char* c = cached_sample(i)) return c;
  if (raw_cache_host_ && cached_[static_cast<size_t>(i)]) return cache_.get() + i * cache_sample_bytes_;
  return static_cast<const char*>(src_->raw_ptr(i));
}

// Sample i of a source that decodes it (Source::decodes_in_ram), by the
// calling thread: into its slot of the raw cache where that keeps it
// (later epochs skip the decoding), else into `scratch` (a sample's size;
// the caller's chunk frees it: per-thread buffers kept for the threads'
// lives would hold a sample per helper thread of every rank).
const char* LoaderImpl::decoded(int64_t i, std::vector<char>& scratch) {
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
void LoaderImpl::prefetch_sample(int64_t i) const {
  if (const char* p = ram_bytes(i))
    prefetch_bytes(p, static_cast<size_t>(cached_sample(i) ? cache_sample_bytes_ : src_->raw_bytes()));
}

// Sample i from the in-memory cache into the batch; false if not cached.
bool LoaderImpl::from_cache(int64_t i, char* dst) const {
  const char* c = cached_sample(i);
  if (c) std::memcpy(dst, c, static_cast<size_t>(cache_sample_bytes_));
  return c != nullptr;
}

void LoaderImpl::to_cache(int64_t i, const char* src) {
  if (!cache_on_ || raw_cache_host_) return;
  std::memcpy(cache_.get() + i * cache_sample_bytes_, src, static_cast<size_t>(cache_sample_bytes_));
  cached_[static_cast<size_t>(i)] = 1;  // distinct samples: no two threads share an entry
}

// Raw sample i -> float32 channels-first at dst (host side), then cached.
void LoaderImpl::convert(const void* raw, int64_t i, char* dst) {
  // The plan was checked in the constructor: no per-sample checks,
  // allocations or (single-threaded) OpenMP region.
  kernels::FusedOutputs y;
  y.y[0] = reinterpret_cast<float*>(dst);
  kernels::run_fused_downsample(cpu_, plan_, raw, y);
  to_cache(i, dst);
}

}  // namespace mrmf::data::detail
