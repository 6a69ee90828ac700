// Element-wise functors: activations, bias, MSE, BLAS-1 style helpers.
// Layout convention for per-channel ops: [N, C, inner] contiguous, where
// inner is L (1-D), D*H*W (3-D) or 1 (flat vectors / Linear outputs).
#pragma once

#include "kernels/hd.h"

namespace mrmf::kernels {

// y = x > 0 ? x : slope * x   (slope = 0 is ReLU)
struct LeakyReluForward {
  const float* x;
  float* y;
  float slope;
  MRMF_HD void operator()(int64_t i) const {
    y[i] = leaky_relu_value(x[i], slope);  // hd.h: the vectorizable form
  }
};

// dx = dy * (x > 0 ? 1 : slope). At the kink x == 0 the left derivative
// (slope) is used, as PyTorch does.
struct LeakyReluBackward {
  const float* x;
  const float* dy;
  float* dx;
  float slope;
  MRMF_HD void operator()(int64_t i) const {
    dx[i] = leaky_relu_grad(dy[i], x[i], slope);
  }
};

// y[n, c, k] += bias[c]
struct BiasAdd {
  float* y;
  const float* bias;
  int64_t channels;
  int64_t inner;
  MRMF_HD void operator()(int64_t i) const { y[i] += bias[(i / inner) % channels]; }
};

// Reduction term for d(bias)[c] = sum_{n,k} dy[n, c, k]: segment c, index j over (n, k).
struct BiasGradTerm {
  const float* dy;
  int64_t channels;
  int64_t inner;
  MRMF_HD float operator()(int64_t c, int64_t j) const {
    const int64_t n = j / inner, k = j - n * inner;
    return dy[(n * channels + c) * inner + k];
  }
};

// Reduction term for sum (p - t)^2.
struct SquaredErrorTerm {
  const float* pred;
  const float* target;
  MRMF_HD float operator()(int64_t, int64_t j) const {
    const float d = pred[j] - target[j];
    return d * d;
  }
};

// d(mean (p - t)^2)/dp = 2 (p - t) / count
struct MseGrad {
  const float* pred;
  const float* target;
  float* grad;
  float scale;  // 2 / count
  MRMF_HD void operator()(int64_t i) const { grad[i] = scale * (pred[i] - target[i]); }
};

struct Fill {
  float* y;
  float value;
  MRMF_HD void operator()(int64_t i) const { y[i] = value; }
};

// y = alpha * x + beta * y
struct Axpby {
  const float* x;
  float* y;
  float alpha;
  float beta;
  MRMF_HD void operator()(int64_t i) const { y[i] = alpha * x[i] + beta * y[i]; }
};

// Reduction term for the sum of squares (gradient norms).
struct SquareTerm {
  const float* x;
  MRMF_HD float operator()(int64_t, int64_t j) const { return x[j] * x[j]; }
};

// Counts non-finite values (NaN / Inf) as a float sum.
struct NonFiniteTerm {
  const float* x;
  MRMF_HD float operator()(int64_t, int64_t j) const {
    const float v = x[j];
    return (v - v) != 0.f ? 1.f : 0.f;  // NaN - NaN and Inf - Inf are NaN
  }
};

}  // namespace mrmf::kernels
