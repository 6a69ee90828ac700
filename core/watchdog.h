// Waiting on asynchronous collectives without hanging when a peer dies.
//
// An NCCL all-reduce whose peer process has died never completes: a plain
// cudaStreamSynchronize() would block forever. wait_or_abort() polls instead
// -- completion, the library's asynchronous error state, and a deadline --
// and on an error or timeout calls the abort hook (ncclCommAbort) and throws,
// so the rank exits with a message naming the operation within the timeout.
#pragma once

#include <functional>
#include <string>

namespace mrmf {

// Seconds a collective may take before the job is declared stuck:
// $MRMF_COMM_TIMEOUT_S, default 60 (a healthy all-reduce of our buckets
// takes milliseconds; the wait also covers the compute queued before it).
// Throws Usage for a value that is not a positive number.
double comm_timeout_seconds();

struct WatchdogHooks {
  std::function<bool()> done;          // true once the operation completed
  std::function<std::string()> error;  // non-empty: an asynchronous failure, described
  std::function<void()> abort;         // tears the communicator down (called once, before throwing)
};

// Polls `hooks` until done() (returns normally), error() is non-empty or
// `timeout_s` have passed (calls abort(), throws mrmf::Error naming `what`).
void wait_or_abort(const std::string& what, double timeout_s, const WatchdogHooks& hooks);

}  // namespace mrmf
