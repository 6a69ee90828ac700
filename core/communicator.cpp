#include "core/communicator.h"

#include <chrono>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "core/check_mpi.h"
#include "core/log.h"
#include "core/watchdog.h"
#include "kernels/elementwise_ops.h"
#ifdef MRMF_HAVE_CUDA
#include "core/check_cuda.h"
#endif

namespace mrmf {

namespace {
// MPI_COMM_WORLD's duplicate for mpi_all_ranks_arrive() alone: its barrier
// cannot match a collective that other ranks issue on the world (such as a
// concurrent run's other group at its exchange).
MPI_Comm g_exit_comm = MPI_COMM_NULL;

// A barrier that sleeps `poll_ms` between tests rather than spinning in
// MPI_Barrier (a rank that waits long leaves its core to the others), for at
// most `timeout_s`. *arrived: whether every rank came; the result is the
// first failing MPI call's code. `while_waiting` (which must not throw) is
// called between tests.
int sleeping_barrier(MPI_Comm comm, int poll_ms, double timeout_s, bool* arrived,
                     const std::function<void()>* while_waiting = nullptr) noexcept {
  *arrived = false;
  MPI_Request req = MPI_REQUEST_NULL;
  if (const int rc = MPI_Ibarrier(comm, &req); rc != MPI_SUCCESS) return rc;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (int done = 0;;) {
    if (const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
    if (done) {
      *arrived = true;
      return MPI_SUCCESS;
    }
    if (std::chrono::steady_clock::now() > end) return MPI_SUCCESS;
    if (while_waiting && *while_waiting) (*while_waiting)();
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}
}  // namespace

void mpi_init(int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    MRMF_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  }
  // Errors come back as codes (and become exceptions) instead of aborting
  // inside MPI without a message that names what failed.
  MRMF_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  if (g_exit_comm == MPI_COMM_NULL) MRMF_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g_exit_comm));
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  set_error_rank(rank);
  log::configure(rank, size);
}

bool mpi_initialized() noexcept {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized;
}

void mpi_finalize() noexcept {
  if (!mpi_initialized()) return;
  if (g_exit_comm != MPI_COMM_NULL) MPI_Comm_free(&g_exit_comm);
  MPI_Finalize();
}

bool mpi_all_ranks_arrive(double timeout_s) noexcept {
  if (!mpi_initialized() || g_exit_comm == MPI_COMM_NULL) return false;
  bool arrived = false;
  // Past the timeout the job is aborted next: the request with it.
  return sleeping_barrier(g_exit_comm, 20, timeout_s, &arrived) == MPI_SUCCESS && arrived;
}

void mpi_abort(int code) noexcept {
  if (mpi_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

// ---------------------------------------------------------------- NCCL state
#ifdef MRMF_HAVE_CUDA
struct Communicator::Nccl {
  ncclComm_t comm = nullptr;
  int device = -1;
};
static void destroy_nccl(Communicator::Nccl* n) {
  if (!n) return;
  // After an asynchronous error a communicator must be aborted, not destroyed;
  // abort is also safe on a healthy one.
  if (n->comm) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess && async == ncclSuccess)
      MRMF_NCCL_WARN(ncclCommDestroy(n->comm));
    else
      MRMF_NCCL_WARN(ncclCommAbort(n->comm));
  }
  delete n;
}
#else
struct Communicator::Nccl {};
[[maybe_unused]] static void destroy_nccl(Communicator::Nccl* n) { delete n; }
#endif

// ---------------------------------------------------------------- Communicator
Communicator::Communicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  MRMF_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MRMF_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

Communicator Communicator::world() {
  MRMF_CHECK(mpi_initialized(), "Communicator::world() before mpi_init()");
  return Communicator(MPI_COMM_WORLD, false);
}

void Communicator::release() noexcept {
  nccl_.reset();
  if (owned_ && comm_ != MPI_COMM_NULL && mpi_initialized()) MRMF_MPI_WARN(MPI_Comm_free(&comm_));
  comm_ = MPI_COMM_NULL;
  owned_ = false;
}

Communicator::~Communicator() { release(); }

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(o.comm_), owned_(o.owned_), rank_(o.rank_), size_(o.size_), nccl_(std::move(o.nccl_)) {
  o.comm_ = MPI_COMM_NULL;
  o.owned_ = false;
}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    release();
    comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
    owned_ = std::exchange(o.owned_, false);
    rank_ = o.rank_;
    size_ = o.size_;
    nccl_ = std::move(o.nccl_);
  }
  return *this;
}

Communicator Communicator::split(int color, int key) const {
  MPI_Comm sub = MPI_COMM_NULL;
  MRMF_MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  MRMF_MPI_CHECK(MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN));
  return Communicator(sub, true);
}

void Communicator::ensure_nccl(Device device, Stream& stream) {
#ifdef MRMF_HAVE_CUDA
  if (nccl_ && nccl_->device == device.index) {
    // The watchdog aborts a stuck communicator (comm = nullptr): a later
    // collective on it would fail with NCCL's bare "invalid argument".
    MRMF_CHECK_KIND(Runtime, nccl_->comm,
                    "NCCL: this communicator was aborted after an earlier failure (see the "
                    "first error); it cannot be used again");
    return;
  }
  ncclUniqueId id{};
  ncclResult_t got = ncclSuccess;
  if (rank_ == 0) got = ncclGetUniqueId(&id);
  // Every rank learns whether rank 0 has an id: rank 0 throwing alone left
  // the others in the id's broadcast for ever.
  int ok = got == ncclSuccess ? 1 : 0;
  MRMF_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, comm_));
  if (rank_ == 0) MRMF_NCCL_CHECK(got);
  MRMF_CHECK_KIND(Runtime, ok == 1, "NCCL: rank 0 could not make the communicator's unique id (its error says why)");
  MRMF_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm_));
  set_current_device(device);
  // Installed only once initialised: after a failed init a later call must
  // try again, not find a communicator-less state for this device.
  std::unique_ptr<Nccl, void (*)(Nccl*)> n(new Nccl(), &destroy_nccl);
  n->device = device.index;
  MRMF_NCCL_CHECK(ncclCommInitRank(&n->comm, size_, id, rank_));
  nccl_ = std::move(n);
#else
  (void)stream;
  MRMF_THROW(Device, "NCCL communicator requested on ", device.str(), " but mrmf was built without CUDA");
#endif
}

void Communicator::allreduce_sum(const Tensor& t, Stream& stream) {
  MRMF_CHECK_KIND(Shape, t.dtype() == DType::F32 && t.is_contiguous(), "allreduce: expected a contiguous float32 tensor, got ",
                  t.str());
  if (size_ == 1 || t.numel() == 0) return;
  if (t.device().is_cuda()) {
    enqueue_nccl_sum(t, stream);
    // Waited for here, under the watchdog: a dead peer is an error, not a
    // hang in a later cudaStreamSynchronize (iallreduce_sum is the
    // asynchronous form).
    sync_nccl(stream, "NCCL all-reduce");
    return;
  }
  // MPI counts are int: reduce in chunks so buffers above 2^31 elements work.
  constexpr int64_t kMaxCount = int64_t(1) << 30;
  float* p = t.data<float>();
  for (int64_t off = 0; off < t.numel(); off += kMaxCount) {
    const int count = static_cast<int>(std::min(kMaxCount, t.numel() - off));
    MRMF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p + off, count, MPI_FLOAT, MPI_SUM, comm_));
  }
}

void Communicator::allreduce_avg(const Tensor& t, Stream& stream) {
  if (size_ == 1) return;
  allreduce_sum(t, stream);
  // Summing then scaling once by 1/size (rather than pre-scaling every
  // contribution) gives the same result on every rank count up to rounding.
  kernels::axpby(stream, t, t, 0.f, 1.f / static_cast<float>(size_));
}

void Communicator::enqueue_nccl_sum(const Tensor& t, Stream& stream) {
#ifdef MRMF_HAVE_CUDA
  ensure_nccl(t.device(), stream);
  MRMF_NCCL_CHECK(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), ncclFloat, ncclSum,
                                nccl_->comm, static_cast<cudaStream_t>(stream.native())));
#else
  (void)stream;
  MRMF_THROW(Device, "NCCL all-reduce of ", t.str(), " but mrmf was built without CUDA");
#endif
}

Communicator::Request Communicator::iallreduce_sum(const Tensor& t, Stream& stream) {
  Request r;
  MRMF_CHECK_KIND(Shape, t.dtype() == DType::F32 && t.is_contiguous(), "allreduce: expected a contiguous float32 tensor, got ",
                  t.str());
  if (size_ == 1 || t.numel() == 0) return r;
  if (t.device().is_cuda()) {
    enqueue_nccl_sum(t, stream);  // NCCL: asynchronous on the stream; wait() waits
    r.stream = &stream;
    return r;
  }
  MRMF_CHECK(t.numel() < (int64_t(1) << 31), "non-blocking allreduce of ", t.numel(), " elements exceeds MPI's int count");
  MRMF_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM, comm_, &r.mpi));
  return r;
}

bool Communicator::test(Request& r) {
  if (r.mpi == MPI_REQUEST_NULL) return true;
  int done = 0;
  MRMF_MPI_CHECK(MPI_Test(&r.mpi, &done, MPI_STATUS_IGNORE));  // a finished request becomes MPI_REQUEST_NULL
  return done != 0;
}

void Communicator::wait(Request& r) {
  if (r.mpi != MPI_REQUEST_NULL) MRMF_MPI_CHECK(MPI_Wait(&r.mpi, MPI_STATUS_IGNORE));
  Stream* s = r.stream;
  r = Request{};  // consumed even if the wait below throws
  if (s && nccl_) sync_nccl(*s, "NCCL all-reduce");
  else if (s) s->synchronize();
}

void Communicator::sync_nccl(Stream& stream, const char* what) {
#ifdef MRMF_HAVE_CUDA
  Nccl* n = nccl_.get();
  cudaStream_t st = static_cast<cudaStream_t>(stream.native());
  WatchdogHooks hooks;
  hooks.done = [st, n] {
    const cudaError_t e = cudaStreamQuery(st);
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess && n->comm) {
      // A sticky CUDA error: abort the communicator before throwing, or its
      // destruction (ncclCommDestroy) could wait for peers forever.
      MRMF_NCCL_WARN(ncclCommAbort(n->comm));
      n->comm = nullptr;
    }
    MRMF_CUDA_CHECK(e);
    return true;
  };
  hooks.error = [n]() -> std::string {
    ncclResult_t async = ncclSuccess;
    if (!n->comm || ncclCommGetAsyncError(n->comm, &async) != ncclSuccess) return "ncclCommGetAsyncError failed";
    if (async == ncclSuccess || async == ncclInProgress) return {};
    return std::string(ncclGetErrorString(async)) + " (" + ncclGetLastError(n->comm) + ")";
  };
  hooks.abort = [n] {
    if (n->comm) MRMF_NCCL_WARN(ncclCommAbort(n->comm));
    n->comm = nullptr;  // aborted: never destroyed again
  };
  wait_or_abort(std::string(what) + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_),
                comm_timeout_seconds(), hooks);
#else
  (void)what;
  stream.synchronize();
#endif
}

void Communicator::broadcast(const Tensor& t, int root, Stream& stream) {
  MRMF_CHECK_KIND(Shape, t.is_contiguous(), "broadcast: expected a contiguous tensor, got ", t.str());
  if (size_ == 1 || t.numel() == 0) return;
  if (t.device().is_cuda()) {
#ifdef MRMF_HAVE_CUDA
    ensure_nccl(t.device(), stream);
    MRMF_NCCL_CHECK(ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, nccl_->comm,
                                  static_cast<cudaStream_t>(stream.native())));
    // Rare (start, parameter exchange): wait here, where a dead peer shows.
    sync_nccl(stream, "NCCL broadcast");
    return;
#endif
  }
  MRMF_CHECK(t.nbytes() < (size_t(1) << 31), "broadcast of ", t.nbytes(), " bytes exceeds MPI's int count");
  MRMF_MPI_CHECK(MPI_Bcast(t.raw_data(), static_cast<int>(t.nbytes()), MPI_BYTE, root, comm_));
}

double Communicator::allreduce_sum(double v) const {
  double out = v;
  if (size_ > 1) MRMF_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm_));
  return out;
}

void Communicator::allreduce_sum(double* v, int n) const {
  if (size_ > 1) MRMF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, comm_));
}

double Communicator::allreduce_max(double v) const {
  double out = v;
  if (size_ > 1) MRMF_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm_));
  return out;
}

std::vector<double> Communicator::allgather(const std::vector<double>& v) const {
  if (size_ == 1) return v;
  std::vector<double> out(v.size() * static_cast<size_t>(size_));
  const int n = static_cast<int>(v.size());
  MRMF_MPI_CHECK(MPI_Allgather(v.data(), n, MPI_DOUBLE, out.data(), n, MPI_DOUBLE, comm_));
  return out;
}

void Communicator::barrier() const {
  if (size_ > 1) MRMF_MPI_CHECK(MPI_Barrier(comm_));
}

void Communicator::idle_barrier(int poll_ms, const std::function<void()>& while_waiting) const {
  if (size_ == 1) return;
  bool arrived = false;
  MRMF_MPI_CHECK(sleeping_barrier(comm_, poll_ms, std::numeric_limits<double>::infinity(), &arrived, &while_waiting));
}

namespace {
// Calls `ready` until it answers true, at least once per millisecond of
// `budget_ms` however long a sleep takes on a loaded node (it is the number
// of MPI calls that moves data); false when the budget is spent.
template <class F>
bool poll_for(int budget_ms, F&& ready) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  for (int polls = 1;; ++polls) {
    if (ready()) return true;
    if (polls > budget_ms && std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace

void Communicator::send_signal(int dest, int tag) const {
  // Non-blocking and fire-and-forget, so two ranks signalling each other at
  // the same moment cannot deadlock whatever the MPI's send protocol; the
  // buffer is static, and every signal sent is received before the exchange.
  // It is given up to 100 ms of progress here (an eager message leaves at
  // once), so that it does not wait for this rank's next MPI call.
  static const int kOne = 1;
  MPI_Request r = MPI_REQUEST_NULL;
  MRMF_MPI_CHECK(MPI_Isend(&kOne, 1, MPI_INT, dest, tag, comm_, &r));
  const bool sent = poll_for(100, [&] {
    int done = 0;
    MRMF_MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
  if (!sent) MRMF_MPI_CHECK(MPI_Request_free(&r));
}

bool Communicator::signal_arrived(int source, int tag, int wait_ms) const {
  return poll_for(wait_ms, [&] {
    int flag = 0;
    MRMF_MPI_CHECK(MPI_Iprobe(source, tag, comm_, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  });
}

void Communicator::idle_receive_signal(int source, int tag, int poll_ms,
                                       const std::function<void()>& while_waiting) const {
  while (!signal_arrived(source, tag)) {
    if (while_waiting) while_waiting();
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  int v = 0;
  MRMF_MPI_CHECK(MPI_Recv(&v, 1, MPI_INT, source, tag, comm_, MPI_STATUS_IGNORE));
}

std::string Communicator::broadcast_string(const std::string& s, int root) const {
  if (size_ == 1) return s;
  int64_t n = static_cast<int64_t>(s.size());
  MRMF_MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm_));
  std::string out = rank_ == root ? s : std::string(static_cast<size_t>(n), '\0');
  MRMF_CHECK(n <= INT32_MAX, "broadcast_string: ", n, " bytes is more than one MPI call carries");
  MRMF_MPI_CHECK(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, root, comm_));
  return out;
}

void Communicator::check_same_on_all_ranks(uint64_t value, const std::string& what) const {
  if (size_ == 1) return;
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  MRMF_MPI_CHECK(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_));
  for (int r = 0; r < size_; ++r)
    // Hashes read best in hex, counts in decimal: small values are counts.
    MRMF_CHECK_KIND(Config, all[static_cast<size_t>(r)] == all[0], "ranks disagree on ", what, ": rank ", r,
                    " has ", (all[0] < (1u << 20) ? std::dec : std::hex), all[static_cast<size_t>(r)],
                    " but rank 0 has ", all[0]);
}

}  // namespace mrmf
