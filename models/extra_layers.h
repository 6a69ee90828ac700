// Small model-specific layers that the generic layer set does not have.
//
// ScaledTanh: y = scale * tanh(x), the MLPerf HPC CosmoFlow output head
// (Dense(4, activation='tanh') followed by Lambda(x * 1.2)). Parameter-free.
// It acts on the [N, outputs] network output only (a few numbers per sample),
// so CUDA tensors are processed through a host round trip instead of a
// dedicated kernel: the cost is one tiny copy each way per step.
#pragma once

#include "layers/module.h"

namespace mrmf {

class ScaledTanh : public Module {
 public:
  explicit ScaledTanh(float scale = 1.2f) : scale_(scale) {}
  std::string type() const override { return "ScaledTanh"; }
  Shape output_shape(const Shape& in) const override { return in; }
  Tensor forward(Context& ctx, const Tensor& x) override;
  // dx = dy * scale * (1 - tanh(x)^2), computed from the saved output.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override { t_ = Tensor(); }
  std::optional<CentreMap> centre_map(int) const override { return CentreMap{}; }
  float scale() const { return scale_; }

 private:
  float scale_;
  Tensor t_;  // tanh(x) on the host, kept by a training forward
};

}  // namespace mrmf
