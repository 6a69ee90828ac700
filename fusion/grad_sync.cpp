#include "fusion/grad_sync.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/elementwise_ops.h"

namespace mrmf {

GradientSync::GradientSync(Communicator& comm, ParamStore& store, size_t bucket_bytes) : comm_(comm), store_(store) {
  const Device dev = store.grads().device();
  if (comm.size() > 1) {
    backward_end_ = Event::create(dev);
    comm_end_ = Event::create(dev);
    if (dev.is_cuda()) {
      comm_stream_ = Stream::create(dev);
      ready_ = Event::create(dev, /*timing=*/false);
    }
  }
  const int64_t n = store.num_param_elements();
  const int64_t per = std::max<int64_t>(ParamStore::kAlign, static_cast<int64_t>(bucket_bytes / sizeof(float)));
  for (int64_t end = n; end > 0;) {
    const int64_t begin = std::max<int64_t>(0, end - per);
    Bucket b;
    b.begin = begin;
    b.end = end;
    if (comm.size() > 1) {
      b.start = Event::create(dev);
      b.stop = Event::create(dev);
    }
    buckets_.push_back(std::move(b));
    end = begin;
  }
}

void GradientSync::begin_step() {
  timed_ = false;
  for (auto& b : buckets_) b.launched = b.done = false;
  launched_ = 0;
}

void GradientSync::launch(Bucket& b, Stream& compute) {
  Stream* s = &compute;
  if (comm_stream_.native()) {  // the bucket's gradients are queued on compute up to here
    ready_.record(compute);
    ready_.wait_on(comm_stream_);
    s = &comm_stream_;
  }
  b.start.record(*s);  // GPU: when the communication stream gets to it
  b.req = comm_.iallreduce_sum(store_.grads().narrow(0, b.begin, b.end - b.begin), *s);
  b.launched = true;
  ++launched_;
  if (comm_stream_.native()) mark_done(b, *s);  // its end, on the stream behind the all-reduce
}

void GradientSync::mark_done(Bucket& b, Stream& s) {
  b.stop.record(s);
  b.done = true;
}

void GradientSync::ready_from(int64_t offset, Stream& compute) {
  if (comm_.size() == 1 || offset < 0) return;
  // Between two layers' backward passes: let MPI move the buckets already in
  // flight (on the CPU, MPICH advances non-blocking collectives only inside
  // MPI calls, so without this they would mostly run in finish()). On one
  // node (shared memory, 2 ranks, NI T = 1600) the exposed comm time was the
  // same with and without (0.08-0.19 s of ~2.1 s per 10 steps, noise);
  // between nodes is where an idle reduction costs.
  for (auto& b : buckets_)
    if (b.launched && !b.done && comm_.test(b.req)) mark_done(b, compute);
  for (auto& b : buckets_) {
    if (b.launched) continue;
    if (b.begin < offset) break;  // buckets are ordered from the end: later ones are not ready either
    launch(b, compute);
  }
}

void GradientSync::finish(Stream& compute) {
  if (comm_.size() == 1) return;
  backward_end_.record(compute);
  for (auto& b : buckets_)
    if (!b.launched) launch(b, compute);
  Tensor g = store_.grads();
  const float inv = 1.f / static_cast<float>(comm_.size());
  if (comm_stream_.native()) {
    // Stamped by the GPU when the last all-reduce ends (not when the host
    // notices), and the averaging queued behind it before the host waits.
    comm_end_.record(comm_stream_);
    comm_end_.wait_on(compute);
    kernels::axpby(compute, g, g, 0.f, inv);  // one scaling pass rather than one per bucket
    for (auto& b : buckets_) comm_.wait(b.req);  // under the NCCL watchdog: a dead peer is an error, not a hang
  } else {
    for (auto& b : buckets_) {
      comm_.wait(b.req);
      if (!b.done) mark_done(b, compute);
    }
    comm_end_.record(compute);  // CPU: now, the waits have returned
    kernels::axpby(compute, g, g, 0.f, inv);
  }
  timed_ = true;
}

double GradientSync::exposed_comm_seconds() const {
  if (!timed_) return 0.0;  // also one rank: finish() records nothing there
  return std::max(0.0, static_cast<double>(comm_end_.elapsed_ms_since(backward_end_)) * 1e-3);
}

double GradientSync::in_flight_comm_seconds() const {
  if (!timed_ || buckets_.empty()) return exposed_comm_seconds();
  // The union of the buckets' intervals, in ms after the earliest start
  // (they overlap on the CPU, where several are in flight at once).
  std::vector<std::pair<double, double>> iv;
  const Event& origin = buckets_.front().start;  // launched first (buckets go in order)
  for (const auto& b : buckets_) iv.emplace_back(b.start.elapsed_ms_since(origin), b.stop.elapsed_ms_since(origin));
  std::sort(iv.begin(), iv.end());
  double total_ms = 0, lo = 0, hi = 0;
  bool open = false;
  for (const auto& [a, z] : iv) {
    if (open && a <= hi) {
      hi = std::max(hi, z);
      continue;
    }
    if (open) total_ms += hi - lo;
    lo = a, hi = z, open = true;
  }
  if (open) total_ms += hi - lo;
  // Never less than the exposed part: the two come from different events,
  // whose timestamps can disagree by a few microseconds.
  return std::max(total_ms * 1e-3, exposed_comm_seconds());
}

}  // namespace mrmf
