// Bucketed, overlapped gradient averaging over the flat gradient buffer.
//
// The buffer is cut into buckets of about `bucket_bytes`, from its end
// backwards: backward produces the gradients of the last layers first, and
// parameters are laid out in layer order, so after each module's backward
// every gradient at or after that module's first offset is final. A bucket
// whose range lies entirely in the final part is launched at once while
// backward continues; finish() launches the rest, waits, and divides by the
// number of ranks.
//
// CPU: MPI_Iallreduce, progressed between layers (MPI_Test) and waited for
// in finish(). CUDA: NCCL on a communication stream of its own, which waits
// (an event, no host sync) for the compute stream up to the point where the
// bucket became final -- so the all-reduces run beside the rest of backward
// on the GPU instead of queueing between its kernels, as they would on the
// compute stream. finish() waits for the communication stream under the
// NCCL watchdog (a dead rank ends in an error, not a hang) and the averaging
// is queued on the compute stream behind it.
//
// The communication *not* hidden behind compute is measured with events:
// from the end of backward on the compute stream to the end of the last
// all-reduce on the communication stream -- CUDA events on the GPU timeline,
// host timestamps on the CPU (where "the end of the last all-reduce" is when
// the waits returned). Beside it, the time during which any all-reduce was
// in flight, hidden or not (each bucket from its start on the
// communication stream to its end: events on the GPU, where the stream runs
// the buckets one after another; on the CPU from its launch until an
// MPI_Test or the final wait sees it complete -- an upper bound, as MPICH
// advances it only inside MPI calls). In flight minus exposed is the
// communication that backward hid.
#pragma once

#include <vector>

#include "core/communicator.h"
#include "core/stream.h"
#include "layers/param_store.h"

namespace mrmf {

class GradientSync {
 public:
  GradientSync(Communicator& comm, ParamStore& store, size_t bucket_bytes);
  // Pending requests point at comm_stream_: neither copied nor moved.
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void begin_step();
  // Gradients at element offsets >= `offset` are final (queued on `compute`).
  void ready_from(int64_t offset, Stream& compute);
  // Launches what is left, waits for all of it and queues the averaging on
  // `compute`. Does not synchronise `compute`.
  void finish(Stream& compute);
  // The last finish()'s communication not hidden behind backward, in
  // seconds (>= 0; 0 on one rank or before a finish() in this step). Call
  // it once `compute` has been synchronised.
  double exposed_comm_seconds() const;
  // The last finish()'s time with at least one all-reduce in flight, in
  // seconds (>= exposed_comm_seconds(); 0 where that is 0). Same caveat.
  double in_flight_comm_seconds() const;

  size_t num_buckets() const { return buckets_.size(); }
  int launched() const { return launched_; }
  // The stream the all-reduces run on: its own on CUDA with more than one
  // rank, else null (they run on the caller's stream / on the host).
  const Stream* comm_stream() const { return comm_stream_.native() ? &comm_stream_ : nullptr; }

 private:
  struct Bucket {
    int64_t begin, end;
    bool launched = false;
    bool done = false;  // its end is recorded (CPU: seen complete)
    Communicator::Request req;
    Event start, stop;  // in-flight interval (> 1 rank only)
  };
  void launch(Bucket& b, Stream& compute);
  void mark_done(Bucket& b, Stream& compute);

  Communicator& comm_;
  ParamStore& store_;
  std::vector<Bucket> buckets_;  // ordered from the end of the buffer to its start
  int launched_ = 0;
  Stream comm_stream_;           // CUDA with > 1 rank only
  Event ready_;                  // compute -> comm dependency (no timing)
  Event backward_end_, comm_end_;
  bool timed_ = false;           // both recorded in this step
};

}  // namespace mrmf
