// Streams and events as move-only RAII objects.
//
// On the CPU a Stream is a no-op placeholder so that every op can take one
// (the same call sites serve both backends) and an Event records a host
// timestamp, so the trainer's io/compute/comm timers work unchanged on the CPU.
#pragma once

#include <chrono>

#include "core/device.h"

namespace mrmf {

class Stream {
 public:
  Stream() = default;  // the CPU stream
  static Stream create(Device d);
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  // cudaStream_t on CUDA, nullptr on the CPU.
  void* native() const { return handle_; }
  void synchronize() const;

 private:
  void reset() noexcept;
  Device device_ = Device::cpu();
  void* handle_ = nullptr;
};

// A process-wide CPU stream for call sites that have no context.
Stream& cpu_stream();

class Event {
 public:
  Event() = default;
  static Event create(Device d, bool timing = true);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& s);
  void synchronize() const;
  // Milliseconds between `start` (recorded earlier) and this event.
  float elapsed_ms_since(const Event& start) const;
  // Makes `s` wait for this event (cross-stream dependency).
  void wait_on(const Stream& s) const;

 private:
  void reset() noexcept;
  Device device_ = Device::cpu();
  void* handle_ = nullptr;
  std::chrono::steady_clock::time_point host_time_{};
};

}  // namespace mrmf
