// ReLU / LeakyReLU and Flatten: parameter-free layers.
#pragma once

#include "layers/module.h"

namespace mrmf {

// LeakyReLU(slope); slope = 0 is ReLU. Keeps its input for backward.
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(float slope = 0.01f) : slope_(slope) {}
  std::string type() const override { return slope_ == 0.f ? "ReLU" : "LeakyReLU"; }
  Shape output_shape(const Shape& in) const override { return in; }
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override { x_ = Tensor(); }
  std::optional<CentreMap> centre_map(int) const override { return CentreMap{}; }
  float slope() const { return slope_; }

 private:
  float slope_;
  Tensor x_;
};

class ReLU : public LeakyReLU {
 public:
  ReLU() : LeakyReLU(0.f) {}
};

// [N, C, ...] -> [N, C * ...], channel-major (PyTorch's nn.Flatten). A view: no copy.
class Flatten : public Module {
 public:
  std::string type() const override { return "Flatten"; }
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;

 private:
  Shape in_shape_;
};

}  // namespace mrmf
