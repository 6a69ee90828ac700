// Bucketed, overlapped gradient averaging over the flat gradient buffer.
//
// The buffer is cut into buckets of about `bucket_bytes`, from its end
// backwards: backward produces the gradients of the last layers first, and
// parameters are laid out in layer order, so after each module's backward
// every gradient at or after that module's first offset is final. A bucket
// whose range lies entirely in the final part is launched at once
// (MPI_Iallreduce on the CPU, NCCL on the GPU) while backward continues;
// finish() launches the rest, waits, and divides by the number of ranks.
// The time finish() blocks is the communication *not* hidden behind compute.
#pragma once

#include <vector>

#include "core/communicator.h"
#include "layers/param_store.h"

namespace mrmf {

class GradientSync {
 public:
  GradientSync(Communicator& comm, ParamStore& store, size_t bucket_bytes);

  void begin_step();
  // Gradients at element offsets >= `offset` are final.
  void ready_from(int64_t offset, Stream& stream);
  // Launches what is left, waits for everything and averages. Returns the
  // seconds spent blocked here.
  double finish(Stream& stream);

  size_t num_buckets() const { return buckets_.size(); }
  int launched() const { return launched_; }

 private:
  struct Bucket {
    int64_t begin, end;
    bool launched = false;
    Communicator::Request req;
  };
  void launch(Bucket& b, Stream& stream);

  Communicator& comm_;
  ParamStore& store_;
  std::vector<Bucket> buckets_;  // ordered from the end of the buffer to its start
  int launched_ = 0;
};

}  // namespace mrmf
