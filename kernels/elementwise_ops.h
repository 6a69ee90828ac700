// Element-wise ops over float32 contiguous tensors; dispatch on the stream's device.
#pragma once

#include "kernels/dispatch.h"

namespace mrmf::kernels {

MRMF_BOTH_BACKENDS(void leaky_relu_forward(Stream& s, const Tensor& x, const Tensor& y, float slope))
MRMF_BOTH_BACKENDS(void leaky_relu_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& dx, float slope))
MRMF_BOTH_BACKENDS(void bias_add(Stream& s, const Tensor& y, const Tensor& bias))
MRMF_BOTH_BACKENDS(void bias_grad(Stream& s, const Tensor& dy, const Tensor& dbias))
MRMF_BOTH_BACKENDS(void squared_error_sum(Stream& s, const Tensor& pred, const Tensor& target, const Tensor& out1))
MRMF_BOTH_BACKENDS(void mse_grad(Stream& s, const Tensor& pred, const Tensor& target, const Tensor& grad))
MRMF_BOTH_BACKENDS(void fill(Stream& s, const Tensor& y, float value))
MRMF_BOTH_BACKENDS(void axpby(Stream& s, const Tensor& x, const Tensor& y, float alpha, float beta))
MRMF_BOTH_BACKENDS(void sum_of_squares(Stream& s, const Tensor& x, const Tensor& out1))
MRMF_BOTH_BACKENDS(void count_nonfinite(Stream& s, const Tensor& x, const Tensor& out1))

// y = leaky_relu(x); y may alias x.
void leaky_relu_forward(Stream& s, const Tensor& x, const Tensor& y, float slope);
void leaky_relu_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& dx, float slope);
// y[N, C, ...] += bias[C]
void bias_add(Stream& s, const Tensor& y, const Tensor& bias);
// dbias[C] = sum over N and the spatial dims of dy[N, C, ...]
void bias_grad(Stream& s, const Tensor& dy, const Tensor& dbias);
// Mean squared error over all elements; returns it on the host (synchronizes).
float mse_loss(Stream& s, const Tensor& pred, const Tensor& target);
// grad = 2 (pred - target) / numel
void mse_grad(Stream& s, const Tensor& pred, const Tensor& target, const Tensor& grad);
void fill(Stream& s, const Tensor& y, float value);
// y = alpha x + beta y
void axpby(Stream& s, const Tensor& x, const Tensor& y, float alpha, float beta);
// sum x^2 (host result, synchronizes)
float sum_of_squares(Stream& s, const Tensor& x);
// number of NaN/Inf values (host result, synchronizes)
int64_t count_nonfinite(Stream& s, const Tensor& x);

}  // namespace mrmf::kernels
