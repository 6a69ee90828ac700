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
  // Cap for cuDNN workspaces. 4 GiB: CosmoFlow at 128^3 (batch 8) needs more
  // than 1 GiB for its fast first-layer algorithms -- 46 ms a step on an H100
  // against 323 ms under a 1 GiB cap -- and still peaks at 5.3 GB.
  size_t workspace_limit_bytes = size_t(4) << 30;
  uint64_t seed = 0;                          // dropout stream seed
  // GPU convolutions: let cuDNN use TF32 tensor cores (10-bit mantissa
  // products, FP32 accumulation) -- PyTorch's default for convolutions. Off:
  // strict FP32 (FMA) arithmetic, as the GPU-vs-CPU tests need.
  bool allow_tf32 = false;
  // GPU convolutions: time the candidate algorithms once per input shape
  // (cudnnFind, like torch.backends.cudnn.benchmark) instead of trusting the
  // heuristics, which can pick a kernel 10-50x slower for 3-D shapes.
  bool cudnn_benchmark = false;
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
  bool allow_tf32() const { return opts_.allow_tf32; }
  bool cudnn_benchmark() const { return opts_.cudnn_benchmark; }

  bool training() const { return training_; }
  void set_training(bool t) { training_ = t; }

  // BatchNorm running-statistics momentum: the layer's own unless overridden.
  // The override (>= 0; negative clears it) lets a re-calibration pass turn
  // every BN layer into a cumulative average (momentum 1/k at its k-th batch)
  // without the layers knowing about it.
  double bn_momentum(double layer_momentum) const {
    return bn_momentum_override_ >= 0 ? bn_momentum_override_ : layer_momentum;
  }
  void set_bn_momentum_override(double m) { bn_momentum_override_ = m; }

  // Dropout RNG: (seed, step) identifies a forward pass; layers add their
  // own index so two dropout layers never share a mask.
  uint64_t seed() const { return opts_.seed; }
  uint64_t step() const { return step_; }
  void set_step(uint64_t s) { step_ = s; }
  void advance_step() { ++step_; }

  // A scratch device buffer of at least `bytes`, grown on demand and reused.
  void* workspace(size_t bytes);
  // Frees the scratch buffer (after a cuDNN algorithm search, which needs
  // far more than the chosen algorithms do); the next workspace() call
  // allocates what is asked then.
  void release_workspace();

  // CUDA only: lazily created library handles bound to stream().
  GpuHandles& gpu();

 private:
  Device device_;
  ContextOptions opts_;
  Stream stream_;
  bool training_ = true;
  double bn_momentum_override_ = -1;
  uint64_t step_ = 0;
  Tensor workspace_;
  std::unique_ptr<GpuHandles, void (*)(GpuHandles*)> gpu_{nullptr, nullptr};
};

}  // namespace mrmf
