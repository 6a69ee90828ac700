// ResolutionReducer: averages non-overlapping blocks of the spatial dims of
// [N, C, spatial...] by one integer factor per spatial axis (1 = untouched);
// channels are never averaged. E.g. {2} halves the time axis of [N, C, L];
// {2, 2, 2} halves each of D, H, W; {1, 1, 2} reduces only W. A trailing
// remainder that does not fill a block is dropped (floor, like AvgPool).
#pragma once

#include <vector>

#include "layers/module.h"

namespace mrmf {

class ResolutionReducer : public Module {
 public:
  explicit ResolutionReducer(std::vector<int64_t> factors);
  std::string type() const override { return "ResolutionReducer"; }
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override { in_shape_ = Shape(); }
  std::optional<CentreMap> centre_map(int axis) const override;

  const std::vector<int64_t>& factors() const { return factors_; }

 private:
  std::string who() const { return type() + " '" + name() + "'"; }
  std::vector<int64_t> factors_;
  Shape in_shape_;
};

}  // namespace mrmf
