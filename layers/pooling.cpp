#include "layers/pooling.h"

namespace mrmf {

Pool::Pool(kernels::PoolKind kind, const kernels::PoolParams& params) : kind_(kind), params_(params) {
  MRMF_CHECK_KIND(Usage, kind == kernels::PoolKind::Max || kind == kernels::PoolKind::Avg,
                  "Pool: kind must be Max or Avg");
  // Validate the hyper-parameters once, independently of any input.
  for (int d = 0; d < params.nd; ++d)
    MRMF_CHECK_KIND(Usage, params.kernel[d] >= 1 && params.stride[d] >= 1 && params.padding[d] >= 0 &&
                               2 * params.padding[d] <= params.kernel[d],
                    type(), ": invalid pooling ", params.str(), " (padding must be at most half the kernel)");
}

std::string Pool::type() const {
  return std::string(kind_ == kernels::PoolKind::Max ? "MaxPool" : "AvgPool") + (params_.nd == 1 ? "1d" : "3d");
}

Shape Pool::output_shape(const Shape& in) const { return kernels::pool_output_shape(in, params_, who()); }

std::optional<CentreMap> Pool::centre_map(int axis) const {
  if (axis < 0 || axis >= params_.nd) return std::nullopt;
  return window_centre_map(params_.kernel[axis], params_.stride[axis], params_.padding[axis]);
}

Tensor Pool::forward(Context& ctx, const Tensor& x_in) {
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  const Shape out = output_shape(x.shape());  // throws naming the layer
  Tensor y = Tensor::empty(out, DType::F32, x.device());
  if (kind_ == kernels::PoolKind::Max) {
    argmax_ = ctx.training() ? Tensor::empty(out, DType::I32, x.device()) : Tensor();
    kernels::max_pool_forward(ctx.stream(), x, y, argmax_, params_);
  } else {
    kernels::avg_pool_forward(ctx.stream(), x, y, params_);
  }
  in_shape_ = x.shape();
  saved_ = ctx.training();
  return y;
}

Tensor Pool::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  MRMF_CHECK(saved_, who(), ": backward without a training-mode forward");
  const Shape out = output_shape(in_shape_);
  MRMF_CHECK_KIND(Shape, dy_in.shape() == out, who(), ": gradient ", dy_in.shape().str(), " does not match the output ",
                  out.str(), " of the forward input ", in_shape_.str());
  if (!need_dx) {
    clear_saved();
    return Tensor();
  }
  const Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
  Tensor dx = Tensor::empty(in_shape_, DType::F32, dy.device());
  if (kind_ == kernels::PoolKind::Max)
    kernels::max_pool_backward(ctx.stream(), dy, argmax_, dx, params_);
  else
    kernels::avg_pool_backward(ctx.stream(), dy, dx, params_);
  clear_saved();
  return dx;
}

void Pool::clear_saved() {
  argmax_ = Tensor();
  saved_ = false;
}

}  // namespace mrmf
