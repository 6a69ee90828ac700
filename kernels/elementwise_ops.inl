// Backend bodies for the element-wise family; see kernels/dispatch.h.
#include "kernels/elementwise.h"
#include "kernels/elementwise_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

void leaky_relu_forward(Stream& s, const Tensor& x, const Tensor& y, float slope) {
  launch(s.native(), x.numel(), LeakyReluForward{x.data<float>(), y.data<float>(), slope});
}

void leaky_relu_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& dx, float slope) {
  launch(s.native(), x.numel(), LeakyReluBackward{x.data<float>(), dy.data<float>(), dx.data<float>(), slope});
}

void bias_add(Stream& s, const Tensor& y, const Tensor& bias) {
  const int64_t C = y.size(1), inner = y.shape().numel_from(2);
  launch(s.native(), y.numel(), BiasAdd{y.data<float>(), bias.data<float>(), C, inner});
}

void bias_grad(Stream& s, const Tensor& dy, const Tensor& dbias) {
  const int64_t N = dy.size(0), C = dy.size(1), inner = dy.shape().numel_from(2);
  segmented_sum(s.native(), C, N * inner, BiasGradTerm{dy.data<float>(), C, inner}, dbias.data<float>());
}

void squared_error_sum(Stream& s, const Tensor& pred, const Tensor& target, const Tensor& out1) {
  segmented_sum(s.native(), 1, pred.numel(), SquaredErrorTerm{pred.data<float>(), target.data<float>()},
                out1.data<float>());
}

void mse_grad(Stream& s, const Tensor& pred, const Tensor& target, const Tensor& grad) {
  const float scale = 2.f / static_cast<float>(pred.numel());
  launch(s.native(), pred.numel(), MseGrad{pred.data<float>(), target.data<float>(), grad.data<float>(), scale});
}

void fill(Stream& s, const Tensor& y, float value) { launch(s.native(), y.numel(), Fill{y.data<float>(), value}); }

void axpby(Stream& s, const Tensor& x, const Tensor& y, float alpha, float beta) {
  launch(s.native(), x.numel(), Axpby{x.data<float>(), y.data<float>(), alpha, beta});
}

void sum_of_squares(Stream& s, const Tensor& x, const Tensor& out1) {
  segmented_sum(s.native(), 1, x.numel(), SquareTerm{x.data<float>()}, out1.data<float>());
}

void count_nonfinite(Stream& s, const Tensor& x, const Tensor& out1) {
  segmented_sum(s.native(), 1, x.numel(), NonFiniteTerm{x.data<float>()}, out1.data<float>());
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
