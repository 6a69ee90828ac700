// Background threads of the data pipeline.
//
// Worker: one thread running queued jobs one at a time in submission order;
// results (or exceptions) come back through futures. Destroying a worker runs
// the jobs still queued, then joins.
//
// IoThread: the process's one I/O worker: every loader of the process (train
// and validation, coarse and dense) hands its batches to this single thread
// instead of owning one.
//
// hdf5_mutex(): serial HDF5 is not thread-safe, so every HDF5 call of the
// process is made holding it -- the loaders' reads (each read, not each
// job: a batch made from RAM or from a mapped file calls no HDF5 and does
// not wait for a checkpoint being written meanwhile, nor makes it wait),
// files being opened, checkpoints.
// It starts on first use and is joined at process exit; it never talks to MPI
// (MPI is initialised FUNNELED). Workers run OpenMP regions with one thread
// unless a job asks for more, so that background conversions do not
// oversubscribe the cores the training step is using.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace mrmf::data {

std::recursive_mutex& hdf5_mutex();

class Worker {
 public:
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues `fn`; its result (or exception) arrives through the future.
  template <class F>
  auto submit(F&& fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> fut = task->get_future();
    push([task] { (*task)(); });
    return fut;
  }

 private:
  void push(std::function<void()> job);
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

struct IoThread {
  static Worker& instance();
};

}  // namespace mrmf::data
