#include "core/stream.h"

#include <utility>

#include "core/error.h"
#ifdef MRMF_HAVE_CUDA
#include "core/check_cuda.h"
#endif

namespace mrmf {

Stream Stream::create(Device d) {
  Stream s;
  s.device_ = d;
  if (d.is_cuda()) {
#ifdef MRMF_HAVE_CUDA
    set_current_device(d);
    cudaStream_t h = nullptr;
    // A blocking stream (cudaStreamDefault): it still runs concurrently with
    // the other created streams, but is ordered with the legacy default
    // stream, where the cpu_stream() placeholder sends device copies and
    // memsets (parameter init, fusion's block copies, checkpoint loads) --
    // a non-blocking stream could read those buffers before they are written.
    MRMF_CUDA_CHECK(cudaStreamCreateWithFlags(&h, cudaStreamDefault));
    s.handle_ = h;
#else
    MRMF_THROW(Device, "cannot create a stream on ", d.str(), ": built without CUDA");
#endif
  }
  return s;
}

void Stream::reset() noexcept {
#ifdef MRMF_HAVE_CUDA
  if (handle_) MRMF_CUDA_WARN(cudaStreamDestroy(static_cast<cudaStream_t>(handle_)));
#endif
  handle_ = nullptr;
}

Stream::~Stream() { reset(); }
Stream::Stream(Stream&& o) noexcept : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)) {}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const {
#ifdef MRMF_HAVE_CUDA
  if (device_.is_cuda()) MRMF_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
#endif
}

Stream& cpu_stream() {
  static Stream s;  // holds no GPU resource, so static destruction is harmless
  return s;
}

Event Event::create(Device d, bool timing) {
  Event e;
  e.device_ = d;
  if (d.is_cuda()) {
#ifdef MRMF_HAVE_CUDA
    set_current_device(d);  // an event belongs to the device current at its creation
    cudaEvent_t h = nullptr;
    MRMF_CUDA_CHECK(cudaEventCreateWithFlags(&h, timing ? cudaEventDefault : cudaEventDisableTiming));
    e.handle_ = h;
#else
    MRMF_THROW(Device, "cannot create an event on ", d.str(), ": built without CUDA");
#endif
  }
  return e;
}

void Event::reset() noexcept {
#ifdef MRMF_HAVE_CUDA
  if (handle_) MRMF_CUDA_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(handle_)));
#endif
  handle_ = nullptr;
}

Event::~Event() { reset(); }
Event::Event(Event&& o) noexcept
    : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)), host_time_(o.host_time_) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
    host_time_ = o.host_time_;
  }
  return *this;
}

void Event::record(const Stream& s) {
  if (device_.is_cpu()) {
    host_time_ = std::chrono::steady_clock::now();
    return;
  }
#ifdef MRMF_HAVE_CUDA
  MRMF_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(s.native())));
#endif
}

void Event::synchronize() const {
#ifdef MRMF_HAVE_CUDA
  if (handle_) MRMF_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
#endif
}

float Event::elapsed_ms_since(const Event& start) const {
  if (device_.is_cpu()) return std::chrono::duration<float, std::milli>(host_time_ - start.host_time_).count();
  float ms = 0.f;
#ifdef MRMF_HAVE_CUDA
  MRMF_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_), static_cast<cudaEvent_t>(handle_)));
#endif
  return ms;
}

void Event::wait_on(const Stream& s) const {
#ifdef MRMF_HAVE_CUDA
  if (handle_ && s.native())
    MRMF_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.native()), static_cast<cudaEvent_t>(handle_), 0));
#endif
}

}  // namespace mrmf
