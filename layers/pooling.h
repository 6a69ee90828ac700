// Pooling layers: MaxPool1d / AvgPool1d over [N, C, L], MaxPool3d / AvgPool3d
// over [N, C, D, H, W]. PyTorch semantics: stride 0 (None) = kernel size,
// floor output size, average pooling counts padding unless told otherwise.
// Backward is a deterministic gather (kernels/pooling.h).
#pragma once

#include <array>

#include "kernels/pooling_ops.h"
#include "layers/module.h"

namespace mrmf {

class Pool : public Module {
 public:
  Pool(kernels::PoolKind kind, const kernels::PoolParams& params);
  std::string type() const override;  // "MaxPool1d", "AvgPool3d", ...
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override;
  std::optional<CentreMap> centre_map(int axis) const override;

  kernels::PoolKind kind() const { return kind_; }
  const kernels::PoolParams& params() const { return params_; }

 private:
  std::string who() const { return type() + " '" + name() + "'"; }
  kernels::PoolKind kind_;
  kernels::PoolParams params_;
  Shape in_shape_;
  Tensor argmax_;  // max pooling, training forward only
  bool saved_ = false;
};

class MaxPool1d : public Pool {
 public:
  explicit MaxPool1d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
      : Pool(kernels::PoolKind::Max, kernels::PoolParams::make_1d(kernel, stride, padding)) {}
};

class AvgPool1d : public Pool {
 public:
  explicit AvgPool1d(int64_t kernel, int64_t stride = 0, int64_t padding = 0, bool count_include_pad = true)
      : Pool(kernels::PoolKind::Avg, kernels::PoolParams::make_1d(kernel, stride, padding, count_include_pad)) {}
};

class MaxPool3d : public Pool {
 public:
  explicit MaxPool3d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
      : MaxPool3d({kernel, kernel, kernel}, {stride, stride, stride}, {padding, padding, padding}) {}
  MaxPool3d(std::array<int64_t, 3> kernel, std::array<int64_t, 3> stride, std::array<int64_t, 3> padding = {0, 0, 0})
      : Pool(kernels::PoolKind::Max, kernels::PoolParams::make_3d(kernel, stride, padding)) {}
};

class AvgPool3d : public Pool {
 public:
  explicit AvgPool3d(int64_t kernel, int64_t stride = 0, int64_t padding = 0, bool count_include_pad = true)
      : AvgPool3d({kernel, kernel, kernel}, {stride, stride, stride}, {padding, padding, padding}, count_include_pad) {}
  AvgPool3d(std::array<int64_t, 3> kernel, std::array<int64_t, 3> stride, std::array<int64_t, 3> padding = {0, 0, 0},
            bool count_include_pad = true)
      : Pool(kernels::PoolKind::Avg, kernels::PoolParams::make_3d(kernel, stride, padding, count_include_pad)) {}
};

}  // namespace mrmf
