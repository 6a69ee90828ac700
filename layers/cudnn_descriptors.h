// RAII wrappers for cuDNN descriptors (CUDA builds only).
//
// Descriptor creation and setting are host-side calls that work without a
// GPU, so this code is unit-tested on CI machines too. Each wrapper is
// move-only and destroys its descriptor without throwing.
#pragma once

#include <cudnn.h>

#include <utility>
#include <vector>

#include "core/check_cuda.h"
#include "core/shape.h"

namespace mrmf::cudnn {

template <class H, cudnnStatus_t (*Create)(H*), cudnnStatus_t (*Destroy)(H)>
class Descriptor {
 public:
  Descriptor() { MRMF_CUDNN_CHECK(Create(&h_)); }
  ~Descriptor() {
    if (h_) MRMF_CUDNN_WARN(Destroy(h_));
  }
  Descriptor(Descriptor&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    if (this != &o) {
      if (h_) MRMF_CUDNN_WARN(Destroy(h_));
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  H get() const { return h_; }
  operator H() const { return h_; }

 private:
  H h_ = nullptr;
};

// Tensor descriptor for a contiguous NC[D]HW float tensor. cuDNN needs at
// least 4 dimensions: 1-D data [N, C, L] is described as [N, C, 1, L] and flat
// vectors [N, F] as [N, F, 1, 1].
class TensorDesc : public Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> {
 public:
  TensorDesc() = default;
  explicit TensorDesc(const Shape& s) { set(s); }
  void set(const Shape& s);
  const std::vector<int>& dims() const { return dims_; }

 private:
  std::vector<int> dims_;
};

// Filter descriptor for [out, in, k...] weights (1-D kernels become [out, in, 1, k]).
class FilterDesc : public Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> {
 public:
  FilterDesc() = default;
  explicit FilterDesc(const Shape& w) { set(w); }
  void set(const Shape& w);
  const std::vector<int>& dims() const { return dims_; }

 private:
  std::vector<int> dims_;
};

// Cross-correlation (PyTorch's convolution) with per-dimension padding and
// stride; 1-D convolutions use the 2-D path with pad 0 / stride 1 in H.
class ConvDesc
    : public Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor> {
 public:
  ConvDesc() = default;
  ConvDesc(const std::vector<int>& pad, const std::vector<int>& stride, bool allow_tensor_ops) {
    set(pad, stride, allow_tensor_ops);
  }
  void set(const std::vector<int>& pad, const std::vector<int>& stride, bool allow_tensor_ops);
};

// The dims cuDNN sees for an mrmf shape (exposed for tests).
std::vector<int> cudnn_dims(const Shape& s);

}  // namespace mrmf::cudnn
