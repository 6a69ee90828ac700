#include "data/prefetch.h"

#include <omp.h>

namespace mrmf::data {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}

Worker& IoThread::instance() {
  static Worker t;  // joined at exit, after the loaders (which wait for their jobs) are gone
  return t;
}

Worker::Worker() {
  thread_ = std::thread([this] { loop(); });
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Worker::push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void Worker::loop() {
  omp_set_num_threads(1);  // this thread's default; a job may raise it for itself
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop requested and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();  // a packaged_task: exceptions go to its future
  }
}

}  // namespace mrmf::data
