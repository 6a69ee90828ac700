// CPU instantiation of the element-wise family, plus the public checked
// entry points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/elementwise_ops.inl"

namespace mrmf::kernels {
namespace {
void same_numel(const char* op, const Tensor& a, const Tensor& b) {
  MRMF_CHECK_KIND(Shape, a.numel() == b.numel(), op, ": ", a.str(), " and ", b.str(), " differ in size");
}
// Runs a one-element reduction into a scratch tensor and returns it on the host.
template <class Fn>
float reduce_to_host(Stream& s, Fn&& fn) {
  Tensor out = Tensor::empty({1}, DType::F32, s.device());
  fn(out);
  if (s.device().is_cpu()) return out.data<float>()[0];
  Tensor host = out.to(Device::cpu(), s);
  s.synchronize();
  return host.data<float>()[0];
}
}  // namespace

void leaky_relu_forward(Stream& s, const Tensor& x, const Tensor& y, float slope) {
  check_devices("leaky_relu_forward", s, {&x, &y});
  check_f32_contiguous("leaky_relu_forward", {&x, &y});
  same_numel("leaky_relu_forward", x, y);
  MRMF_DISPATCH(s, leaky_relu_forward(s, x, y, slope));
}

void leaky_relu_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& dx, float slope) {
  check_devices("leaky_relu_backward", s, {&x, &dy, &dx});
  check_f32_contiguous("leaky_relu_backward", {&x, &dy, &dx});
  same_numel("leaky_relu_backward", x, dy);
  same_numel("leaky_relu_backward", x, dx);
  MRMF_DISPATCH(s, leaky_relu_backward(s, x, dy, dx, slope));
}

void bias_add(Stream& s, const Tensor& y, const Tensor& bias) {
  check_devices("bias_add", s, {&y, &bias});
  check_f32_contiguous("bias_add", {&y, &bias});
  MRMF_CHECK_KIND(Shape, y.ndim() >= 2 && bias.numel() == y.size(1), "bias_add: bias ", bias.str(),
                  " does not match the channels of ", y.str());
  MRMF_DISPATCH(s, bias_add(s, y, bias));
}

void bias_grad(Stream& s, const Tensor& dy, const Tensor& dbias) {
  check_devices("bias_grad", s, {&dy, &dbias});
  check_f32_contiguous("bias_grad", {&dy, &dbias});
  MRMF_CHECK_KIND(Shape, dy.ndim() >= 2 && dbias.numel() == dy.size(1), "bias_grad: bias ", dbias.str(),
                  " does not match the channels of ", dy.str());
  MRMF_DISPATCH(s, bias_grad(s, dy, dbias));
}

float mse_loss(Stream& s, const Tensor& pred, const Tensor& target) {
  check_devices("mse_loss", s, {&pred, &target});
  check_f32_contiguous("mse_loss", {&pred, &target});
  MRMF_CHECK_KIND(Shape, pred.shape() == target.shape(), "mse_loss: prediction ", pred.str(), " vs target ",
                  target.str());
  MRMF_CHECK_KIND(Shape, pred.numel() > 0, "mse_loss: empty prediction");
  const float sum = reduce_to_host(s, [&](const Tensor& out) { MRMF_DISPATCH(s, squared_error_sum(s, pred, target, out)); });
  return sum / static_cast<float>(pred.numel());
}

void mse_grad(Stream& s, const Tensor& pred, const Tensor& target, const Tensor& grad) {
  check_devices("mse_grad", s, {&pred, &target, &grad});
  check_f32_contiguous("mse_grad", {&pred, &target, &grad});
  MRMF_CHECK_KIND(Shape, pred.shape() == target.shape() && pred.numel() == grad.numel(), "mse_grad: prediction ",
                  pred.str(), ", target ", target.str(), ", gradient ", grad.str());
  MRMF_DISPATCH(s, mse_grad(s, pred, target, grad));
}

void fill(Stream& s, const Tensor& y, float value) {
  check_devices("fill", s, {&y});
  check_f32_contiguous("fill", {&y});
  MRMF_DISPATCH(s, fill(s, y, value));
}

void axpby(Stream& s, const Tensor& x, const Tensor& y, float alpha, float beta) {
  check_devices("axpby", s, {&x, &y});
  check_f32_contiguous("axpby", {&x, &y});
  same_numel("axpby", x, y);
  MRMF_DISPATCH(s, axpby(s, x, y, alpha, beta));
}

float sum_of_squares(Stream& s, const Tensor& x) {
  check_devices("sum_of_squares", s, {&x});
  check_f32_contiguous("sum_of_squares", {&x});
  return reduce_to_host(s, [&](const Tensor& out) { MRMF_DISPATCH(s, sum_of_squares(s, x, out)); });
}

int64_t count_nonfinite(Stream& s, const Tensor& x) {
  check_devices("count_nonfinite", s, {&x});
  check_f32_contiguous("count_nonfinite", {&x});
  return static_cast<int64_t>(reduce_to_host(s, [&](const Tensor& out) { MRMF_DISPATCH(s, count_nonfinite(s, x, out)); }));
}

}  // namespace mrmf::kernels
