// oneDNN (CPU) convolution backend.
//
// One Primitives object per layer caches, per input shape, the forward,
// backward-data and backward-weights primitives together with the memory
// objects for oneDNN's preferred (blocked) layouts and the reorders between
// them and the plain ncw / ncdhw, oiw / oidhw user tensors. A training step
// therefore creates nothing after the first one. dnnl.hpp stays inside the
// .cpp (pimpl): it is a heavy header.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "layers/conv.h"

namespace mrmf::onednn_conv {

class Primitives {
 public:
  Primitives();
  ~Primitives();
  Primitives(const Primitives&) = delete;
  Primitives& operator=(const Primitives&) = delete;

  // y = conv(x, w) (+ b when b is defined). All CPU, float32, contiguous.
  void forward(const ConvSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
  // dw = corr(x, dy) and db = sum(dy) (when db is defined), overwritten;
  // dx = conv_transpose(dy, w) when dx is defined. One call so that dy is
  // reordered into oneDNN's layout once for both backward primitives.
  void backward(const ConvSpec& spec, const Tensor& x, const Tensor& dy, const Tensor& w, const Tensor& dx,
                const Tensor& dw, const Tensor& db);

  // Number of per-shape primitive sets created (for cache tests).
  size_t builds() const;
  // The implementation of the last forward or backward run: oneDNN's names
  // for that input shape (fwd, and bwd-data, bwd-weights once a backward was
  // built), or the GEMM path's name for an output with one spatial position
  // (layers/conv_single_output.h).
  std::string impl_info() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrmf::onednn_conv
