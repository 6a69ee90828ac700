// cuDNN (CUDA) convolution backend; implemented in layers/conv_cudnn_cuda.cpp,
// which is compiled in CUDA builds only. Includes nothing CUDA-specific.
//
// One Plans object per layer caches, per (input shape, determinism,
// workspace limit), the cuDNN descriptors and the algorithms picked with the
// cudnnGet*Algorithm_v7 heuristics. Conv1d runs on the 2-D path with H = 1.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "layers/context.h"
#include "layers/conv.h"

namespace mrmf::cudnn_conv {

// The per-dimension (pad, stride) cuDNN sees: 1-D convolutions get a leading
// H entry with pad 0 and stride 1 (exposed for the descriptor tests).
std::pair<std::vector<int>, std::vector<int>> pad_stride(const ConvSpec& spec);

class Plans {
 public:
  Plans();
  ~Plans();
  Plans(const Plans&) = delete;
  Plans& operator=(const Plans&) = delete;

  // y = conv(x, w) (+ b when b is defined). CUDA float32 contiguous tensors on ctx's device.
  void forward(Context& ctx, const ConvSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
  // dw (and db when defined) overwritten; dx computed when defined.
  void backward(Context& ctx, const ConvSpec& spec, const Tensor& x, const Tensor& dy, const Tensor& w,
                const Tensor& dx, const Tensor& dw, const Tensor& db);

  size_t builds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrmf::cudnn_conv
