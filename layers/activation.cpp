#include "layers/activation.h"

#include "kernels/elementwise_ops.h"

namespace mrmf {

Tensor LeakyReLU::forward(Context& ctx, const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  kernels::leaky_relu_forward(ctx.stream(), x, y, slope_);
  if (ctx.training()) x_ = x;
  return y;
}

Tensor LeakyReLU::backward(Context& ctx, const Tensor& dy, bool) {
  MRMF_CHECK(x_.defined(), type(), " '", name(), "': backward without a training-mode forward");
  MRMF_CHECK_KIND(Shape, dy.shape() == x_.shape(), type(), " '", name(), "': gradient ", dy.shape().str(),
                  " does not match the forward input ", x_.shape().str());
  Tensor dx = Tensor::empty(dy.shape(), DType::F32, dy.device());
  kernels::leaky_relu_backward(ctx.stream(), x_, dy, dx, slope_);
  x_ = Tensor();
  return dx;
}

Shape Flatten::output_shape(const Shape& in) const {
  int64_t rest = 1;
  for (int i = 1; i < in.ndim(); ++i) rest *= in[i];
  return Shape{in[0], rest};
}

Tensor Flatten::forward(Context&, const Tensor& x) {
  MRMF_CHECK_KIND(Shape, x.ndim() >= 2, "Flatten '", name(), "': expected at least [N, C], got ", x.shape().str());
  in_shape_ = x.shape();
  return x.contiguous().flatten_from(1);
}

Tensor Flatten::backward(Context&, const Tensor& dy, bool) { return dy.contiguous().view(in_shape_); }

}  // namespace mrmf
