#include "models/extra_layers.h"

#include <cmath>

namespace mrmf {

namespace {
// A contiguous host copy of `x` (synchronizing when it comes from a device).
Tensor host_copy(Context& ctx, const Tensor& x) {
  Tensor h = x.device().is_cuda() ? x.to(Device::cpu(), ctx.stream()) : x.contiguous(ctx.stream());
  if (x.device().is_cuda()) ctx.stream().synchronize();
  return h;
}

Tensor back_to(Context& ctx, const Tensor& host, Device device) {
  if (!device.is_cuda()) return host;
  return host.to(device, ctx.stream());
}
}  // namespace

Tensor ScaledTanh::forward(Context& ctx, const Tensor& x) {
  MRMF_CHECK_KIND(Shape, x.dtype() == DType::F32, "ScaledTanh '", name(), "': expected float32 input, got ", x.str());
  const Tensor xh = host_copy(ctx, x);
  Tensor t = Tensor::empty(x.shape());
  Tensor y = Tensor::empty(x.shape());
  const float* px = xh.data<float>();
  float* pt = t.data<float>();
  float* py = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    pt[i] = std::tanh(px[i]);
    py[i] = scale_ * pt[i];
  }
  // The backward needs tanh(x); keeping it (not x) saves recomputing the tanh.
  t_ = ctx.training() ? t : Tensor();
  return back_to(ctx, y, x.device());
}

Tensor ScaledTanh::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  MRMF_CHECK(t_.defined(), "ScaledTanh '", name(), "': backward without a training forward pass");
  MRMF_CHECK_KIND(Shape, dy.shape() == t_.shape(), "ScaledTanh '", name(), "': gradient ", dy.shape().str(),
                  " does not match the forward output ", t_.shape().str());
  Tensor t = t_;
  t_ = Tensor();
  if (!need_dx) return Tensor();
  const Tensor gh = host_copy(ctx, dy);
  Tensor dx = Tensor::empty(dy.shape());
  const float* pg = gh.data<float>();
  const float* pt = t.data<float>();
  float* pd = dx.data<float>();
  for (int64_t i = 0; i < dy.numel(); ++i) pd[i] = pg[i] * scale_ * (1.f - pt[i] * pt[i]);
  return back_to(ctx, dx, dy.device());
}

}  // namespace mrmf
