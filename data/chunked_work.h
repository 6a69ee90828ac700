// Work cut into chunks that any thread may claim, and the meeting point
// through which a queued batch job offers such work to the thread that waits
// for it.
//
// Why: a batch whose samples are all in RAM (a preloaded Neuron Inverter
// shard, or a cached shard's later epochs) is a gather or a conversion, not a
// read. The I/O thread makes it alone, one core, while the trainer computes.
// When the trainer asks for the batch before it is done (the loader is the
// bottleneck), its OpenMP threads would only sit in next(); instead they
// claim the chunks left, so the wait shrinks to what all cores together need
// (bench_data's NI loader rows, io_threads 1: 65-68 % of a plain read with
// one thread gathering, 89-91 % shared; bench/results/cpu_data_2026-11-27e.txt).
// Batches never change: each chunk writes its own samples, whichever thread
// runs it.
//
//   auto w = std::make_shared<ChunkedWork>(n, [&](int64_t c) { ... chunk c ... });
//   offer->offer(w);  // the producer publishes it, then
//   w->help();        // runs chunks until none is left to claim,
//   w->wait();        // and waits for those others still run (re-throws their error).
//   // the consumer: if (auto w = offer->await()) w->help_all(k);  then waits for the job's result.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

namespace mrmf::data {

class ChunkedWork {
 public:
  ChunkedWork(int64_t chunks, std::function<void(int64_t)> run_chunk);
  ChunkedWork(const ChunkedWork&) = delete;
  ChunkedWork& operator=(const ChunkedWork&) = delete;

  // Runs unclaimed chunks on this thread until none is left. An exception of
  // a chunk is kept for wait() (and the chunk counts as done).
  void help();
  // help() on `threads` threads of an OpenMP team (<= 0: the default team),
  // or on this thread alone inside a parallel region.
  void help_all(int threads = 0);
  // Blocks until every chunk is done (spinning briefly first: the chunks
  // left are others' last ones, core/spin_wait.h); re-throws the first
  // chunk's error.
  void wait();
  int64_t chunks() const { return chunks_; }

 private:
  const int64_t chunks_;
  const std::function<void(int64_t)> run_;
  std::atomic<int64_t> next_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int64_t> done_{0};  // counted under mu_; read without it by wait()'s spin
  std::exception_ptr error_;
};

// One per queued job: the job offers its ChunkedWork here when it has some
// (or says it has none by finishing); await() tells the consumer which.
class WorkOffer {
 public:
  void offer(std::shared_ptr<ChunkedWork> w);
  void finish();  // the job is over; called on every path out of it (errors too)
  // Blocks until the job has offered work (returned) or finished (null);
  // spins briefly first (core/spin_wait.h).
  std::shared_ptr<ChunkedWork> await();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<ChunkedWork> work_;
  bool finished_ = false;
  std::atomic<bool> ready_{false};  // work_ or finished_ set: await()'s spin reads it without mu_
};

}  // namespace mrmf::data
