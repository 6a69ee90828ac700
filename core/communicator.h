// Communicator: the MPI control plane and the gradient-averaging data plane.
//
// MPI launches the job (mpirun/srun, one rank per GPU) and carries CPU
// tensors; on the GPU, NCCL carries device tensors over a communicator built
// from this one (unique id broadcast over MPI). split() makes the
// sub-communicators used by concurrent coarse/dense training. MPI errors are
// returned (MPI_ERRORS_RETURN) and become mrmf::Error, so the caller can
// report them and abort the job rather than hang.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mrmf {

// Initializes MPI once per process (MPI_THREAD_FUNNELED: only the main
// thread talks to MPI); finalizes at mpi_finalize() or never if not called.
void mpi_init(int* argc, char*** argv);
void mpi_finalize() noexcept;
bool mpi_initialized() noexcept;
// Ends the whole job after an unrecoverable error on this rank.
[[noreturn]] void mpi_abort(int code) noexcept;
// Whether every rank of the job calls this within `timeout_s` (a barrier on
// a communicator of its own, which no other collective can match); false
// also when MPI fails. For an orderly end of a job that every rank leaves
// on the same error (a stop signal), in place of mpi_abort.
bool mpi_all_ranks_arrive(double timeout_s) noexcept;

class Communicator {
 public:
  // The world communicator (requires mpi_init).
  static Communicator world();
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // Ranks with equal `color` form a new communicator, ordered by `key`.
  Communicator split(int color, int key) const;

  // In-place sum / average over ranks of a contiguous float32 tensor (CPU:
  // MPI_Allreduce; CUDA: NCCL on `stream`).
  void allreduce_sum(const Tensor& t, Stream& stream);
  void allreduce_avg(const Tensor& t, Stream& stream);
  void broadcast(const Tensor& t, int root, Stream& stream);

  // Non-blocking sum: CPU tensors start an MPI_Iallreduce (completed by
  // wait()); CUDA tensors enqueue an NCCL all-reduce on `stream`, which is
  // asynchronous by nature (wait() then waits for the stream, polling NCCL's
  // asynchronous errors, and gives up after comm_timeout_seconds()).
  struct Request {
    MPI_Request mpi = MPI_REQUEST_NULL;
    Stream* stream = nullptr;
  };
  Request iallreduce_sum(const Tensor& t, Stream& stream);
  void wait(Request& r);
  // Lets MPI advance a non-blocking reduction (MPICH progresses them only
  // inside MPI calls); true once it is complete. No-op for NCCL requests.
  bool test(Request& r);
  double allreduce_sum(double v) const;
  void allreduce_sum(double* v, int n) const;  // in place, n values in one call
  double allreduce_max(double v) const;
  // Every rank's `v` (the same length on every rank), rank after rank.
  std::vector<double> allgather(const std::vector<double>& v) const;
  // `s` of rank `root` on every rank (small host data: JSON records, state).
  std::string broadcast_string(const std::string& s, int root) const;
  void barrier() const;
  // A barrier whose waiting ranks sleep (MPI_Ibarrier polled every
  // `poll_ms`) instead of spinning: for ranks that wait while others work
  // on the same node (MPICH busy-polls in blocking calls, a whole core each).
  // `while_waiting` (which must not throw) is called between polls.
  void idle_barrier(int poll_ms = 20, const std::function<void()>& while_waiting = {}) const;
  // A one-int signal between two ranks (e.g. "my group has finished"):
  // send_signal() does not wait for the receiver (the receiver must consume it with
  // idle_receive_signal() before MPI is finalised), signal_arrived() looks
  // without receiving, idle_receive_signal() sleeps until it is there (like
  // idle_barrier) and consumes it.
  void send_signal(int dest, int tag) const;
  // Polls for up to `wait_ms` (every millisecond) before answering no: MPI
  // moves a message only while both sides are inside MPI calls.
  bool signal_arrived(int source, int tag, int wait_ms = 0) const;
  void idle_receive_signal(int source, int tag, int poll_ms = 20,
                           const std::function<void()>& while_waiting = {}) const;

  // Throws, naming `what`, when ranks disagree on `value` (config hash,
  // parameter layout hash) -- catches diverging ranks before any compute.
  void check_same_on_all_ranks(uint64_t value, const std::string& what) const;

  MPI_Comm native() const { return comm_; }

 private:
  Communicator(MPI_Comm comm, bool owned);
  void release() noexcept;  // frees an owned communicator and the NCCL state
  void ensure_nccl(Device device, Stream& stream);
  // ncclAllReduce (sum, in place) of `t` on `stream`, not waited for.
  void enqueue_nccl_sum(const Tensor& t, Stream& stream);
  // Waits for the NCCL work queued on `stream` under the watchdog
  // (core/watchdog.h): an asynchronous NCCL error or a peer that never
  // arrives aborts the communicator and throws instead of hanging.
  void sync_nccl(Stream& stream, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 1;

 public:
  struct Nccl;  // opaque NCCL state (CUDA builds)

 private:
  std::unique_ptr<Nccl, void (*)(Nccl*)> nccl_{nullptr, nullptr};
};

}  // namespace mrmf
