#include "layers/reducer.h"

#include "kernels/reduce_resolution_ops.h"

namespace mrmf {

ResolutionReducer::ResolutionReducer(std::vector<int64_t> factors) : factors_(std::move(factors)) {
  MRMF_CHECK_KIND(Usage, !factors_.empty() && factors_.size() <= 3,
                  "ResolutionReducer: 1 to 3 factors (one per spatial axis) expected, got ", factors_.size());
  for (int64_t f : factors_) MRMF_CHECK_KIND(Usage, f >= 1, "ResolutionReducer: factors must be >= 1, got ", f);
}

Shape ResolutionReducer::output_shape(const Shape& in) const {
  return kernels::reduce_resolution_shape(in, factors_, who());
}

std::optional<CentreMap> ResolutionReducer::centre_map(int axis) const {
  if (axis < 0 || axis >= static_cast<int>(factors_.size())) return std::nullopt;
  return window_centre_map(factors_[axis], factors_[axis], 0);  // non-overlapping blocks
}

Tensor ResolutionReducer::forward(Context& ctx, const Tensor& x_in) {
  const Shape out = output_shape(x_in.shape());  // throws naming the layer
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  Tensor y = Tensor::empty(out, DType::F32, x.device());
  kernels::reduce_resolution_forward(ctx.stream(), x, y, factors_);
  in_shape_ = ctx.training() ? x.shape() : Shape();
  return y;
}

Tensor ResolutionReducer::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  MRMF_CHECK(in_shape_.ndim() > 0, who(), ": backward without a training-mode forward");
  const Shape out = output_shape(in_shape_);
  MRMF_CHECK_KIND(Shape, dy_in.shape() == out, who(), ": gradient ", dy_in.shape().str(), " does not match the output ",
                  out.str(), " of the forward input ", in_shape_.str());
  Tensor dx;
  if (need_dx) {
    const Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
    dx = Tensor::empty(in_shape_, DType::F32, dy.device());
    kernels::reduce_resolution_backward(ctx.stream(), dy, dx, factors_);
  }
  in_shape_ = Shape();
  return dx;
}

}  // namespace mrmf
