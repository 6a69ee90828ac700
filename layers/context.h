// Execution context of a model on one device: the stream every op runs on,
// train/eval mode, determinism, the dropout RNG position, and (on CUDA) the
// cuDNN/cuBLAS handles and the shared convolution workspace.
//
// One Context per model replica per rank; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include "core/stream.h"
#include "core/tensor.h"

namespace mrmf {

struct GpuHandles;  // defined in layers/gpu_handles.h (CUDA builds only)

struct ContextOptions {
  bool deterministic = false;                 // avoid non-deterministic cuDNN algorithms
  size_t workspace_limit_bytes = size_t(1) << 30;  // cap for cuDNN workspaces
  uint64_t seed = 0;                          // dropout stream seed
};

class Context {
 public:
  explicit Context(Device device, ContextOptions opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;

  Device device() const { return device_; }
  Stream& stream() { return stream_; }
  const ContextOptions& options() const { return opts_; }
  bool deterministic() const { return opts_.deterministic; }
  void set_deterministic(bool d) { opts_.deterministic = d; }

  bool training() const { return training_; }
  void set_training(bool t) { training_ = t; }

  // Dropout RNG: (seed, step) identifies a forward pass; layers add their
  // own index so two dropout layers never share a mask.
  uint64_t seed() const { return opts_.seed; }
  uint64_t step() const { return step_; }
  void set_step(uint64_t s) { step_ = s; }
  void advance_step() { ++step_; }

  // A scratch device buffer of at least `bytes`, grown on demand and reused.
  void* workspace(size_t bytes);

  // CUDA only: lazily created library handles bound to stream().
  GpuHandles& gpu();

 private:
  Device device_;
  ContextOptions opts_;
  Stream stream_;
  bool training_ = true;
  uint64_t step_ = 0;
  Tensor workspace_;
  std::unique_ptr<GpuHandles, void (*)(GpuHandles*)> gpu_{nullptr, nullptr};
};

}  // namespace mrmf
