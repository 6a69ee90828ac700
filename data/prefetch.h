// The process's one background I/O thread.
//
// Serial HDF5 is not thread-safe, so every loader of the process (train and
// validation, coarse and dense) hands its reads to this single thread instead
// of owning one: jobs run one at a time in submission order, each holding
// hdf5_mutex(). Code that calls HDF5 from another thread while loaders may be
// running (opening files, writing checkpoints) holds hdf5_mutex() too.
// The thread starts on first use and is joined at process exit; it never
// talks to MPI (MPI is initialised FUNNELED) and runs OpenMP regions with the
// thread count a job asks for (1 by default, so that a background reduction
// does not oversubscribe the cores the training step is using).
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

class IoThread {
 public:
  static IoThread& instance();
  ~IoThread();

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
  IoThread();
  void push(std::function<void()> job);
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mrmf::data
