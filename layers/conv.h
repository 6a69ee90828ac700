// Convolution layers: Conv1d ([N, C, L]) and Conv3d ([N, C, D, H, W]),
// PyTorch semantics (cross-correlation, symmetric zero padding, no dilation,
// no groups), weights [out, in, k...] and bias [out] in the parameter store.
//
// The layer holds the geometry and dispatches on the input's device:
//   CPU  -> oneDNN primitives (layers/conv_onednn.h), cached per input shape
//   CUDA -> cuDNN (layers/conv_cudnn.h), algorithms cached per input shape
// Backend state lives behind pointers so this header pulls in neither dnnl.hpp
// nor any CUDA header.
#pragma once

#include <memory>
#include <vector>

#include "layers/module.h"

namespace mrmf {

namespace onednn_conv {
class Primitives;
}
#ifdef MRMF_HAVE_CUDA
namespace cudnn_conv {
class Plans;
}
#endif

// Geometry of an N-d convolution (1 <= dims <= 3), shared by the backends.
struct ConvSpec {
  int dims = 1;
  int64_t in_channels = 0, out_channels = 0;
  std::vector<int64_t> kernel, stride, pad;  // one entry per spatial dim
  bool bias = true;

  Shape weight_shape() const;  // [out, in, k...]
  // Output shape for a checked input shape (no validation here).
  Shape output_shape_unchecked(const Shape& x) const;
  int64_t kernel_volume() const;
};

// PyTorch's padding='same' for an odd kernel at stride 1: (k - 1) / 2.
// Throws (kind Shape) for even kernels, where 'same' would need asymmetric padding.
int64_t same_padding(int64_t kernel);

class Conv : public Module {
 public:
  Conv(int dims, int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel, std::vector<int64_t> stride,
       std::vector<int64_t> pad, bool bias);
  ~Conv() override;
  Conv(const Conv&) = delete;
  Conv& operator=(const Conv&) = delete;

  std::string type() const override { return spec_.dims == 1 ? "Conv1d" : spec_.dims == 2 ? "Conv2d" : "Conv3d"; }
  void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) override;
  void init_params(uint64_t seed, InitScheme scheme) override;
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override { x_ = Tensor(); }
  std::optional<CentreMap> centre_map(int axis) const override;

  const ConvSpec& spec() const { return spec_; }
  Tensor weight() const;
  Tensor bias() const;  // undefined without bias
  // Number of oneDNN primitive sets created so far (one per distinct input
  // shape); lets tests check that repeated steps reuse the cache.
  size_t cpu_primitive_builds() const;
  // The CPU implementation of the last forward or backward (oneDNN's names,
  // or the one-output-position GEMM path), for benchmarks and tests.
  std::string cpu_impl_info() const;

 private:
  ConvSpec spec_;
  ParamId w_id_ = -1, b_id_ = -1;
  Tensor x_;  // forward input kept for backward (training mode)
  std::unique_ptr<onednn_conv::Primitives> cpu_;
#ifdef MRMF_HAVE_CUDA
  std::unique_ptr<cudnn_conv::Plans> gpu_;
#endif
};

class Conv1d : public Conv {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t pad = 0,
         bool bias = true)
      : Conv(1, in_channels, out_channels, {kernel}, {stride}, {pad}, bias) {}
};

class Conv3d : public Conv {
 public:
  // Cubic kernel, equal stride and padding in every dimension.
  Conv3d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t pad = 0,
         bool bias = true)
      : Conv(3, in_channels, out_channels, {kernel, kernel, kernel}, {stride, stride, stride}, {pad, pad, pad}, bias) {}
  // Per-dimension (D, H, W) kernel, stride and padding.
  Conv3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel, std::vector<int64_t> stride,
         std::vector<int64_t> pad, bool bias = true)
      : Conv(3, in_channels, out_channels, std::move(kernel), std::move(stride), std::move(pad), bias) {}
};

}  // namespace mrmf
