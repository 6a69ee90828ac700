#include "data/chunked_work.h"

#include <omp.h>

#include "core/spin_wait.h"

namespace mrmf::data {

ChunkedWork::ChunkedWork(int64_t chunks, std::function<void(int64_t)> run_chunk)
    : chunks_(chunks < 0 ? 0 : chunks), run_(std::move(run_chunk)) {}

void ChunkedWork::help() {
  for (;;) {
    const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks_) return;
    std::exception_ptr err;
    try {
      run_(c);
    } catch (...) {
      err = std::current_exception();
    }
    // The count's release (and the mutex, for a wait() that blocked) orders
    // the chunk's writes before wait()'s return.
    std::lock_guard<std::mutex> l(mu_);
    if (err && !error_) error_ = err;
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks_) cv_.notify_all();
  }
}

void ChunkedWork::help_all(int threads) {
  if (omp_in_parallel()) {
    help();
    return;
  }
  const int team = omp_get_max_threads();
  // A chunk's own OpenMP region (the kernel call of a large sample) stays on
  // its thread: the team here is the parallelism, and one thread beside the
  // I/O thread must not become a whole team again.
  omp_set_num_threads(1);
  if (threads <= 0) threads = team;
  if (threads == 1) {
    help();
  } else {
    // help() keeps every exception to itself: nothing escapes the region.
#pragma omp parallel num_threads(threads)
    help();
  }
  omp_set_num_threads(team);
}

void ChunkedWork::wait() {
  spin_until([this] { return done_.load(std::memory_order_acquire) == chunks_; });
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return done_.load(std::memory_order_relaxed) == chunks_; });
  if (error_) std::rethrow_exception(error_);
}

void WorkOffer::offer(std::shared_ptr<ChunkedWork> w) {
  {
    std::lock_guard<std::mutex> l(mu_);
    work_ = std::move(w);
  }
  ready_.store(true, std::memory_order_release);
  cv_.notify_all();
}

void WorkOffer::finish() {
  {
    std::lock_guard<std::mutex> l(mu_);
    finished_ = true;
  }
  ready_.store(true, std::memory_order_release);
  cv_.notify_all();
}

std::shared_ptr<ChunkedWork> WorkOffer::await() {
  spin_until([this] { return ready_.load(std::memory_order_acquire); });
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return work_ || finished_; });
  return finished_ ? nullptr : work_;
}

}  // namespace mrmf::data
