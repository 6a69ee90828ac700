// Optimizer update functors: one fused element-wise pass per step over a
// contiguous range of the flat parameter / gradient / state buffers.
//
// The formulas follow torch.optim exactly (see optim/sgd.h, optim/adam.h).
// Scalars that depend only on the step number (bias corrections) are computed
// on the host in double and passed in, so the per-element work is the same on
// both backends.
//
// Alignment padding between parameters in the flat buffers holds zero values
// and zero gradients; every update below maps (p = 0, g = 0, state = 0) to
// itself, so the padding stays zero and ranges can be updated in one launch.
#pragma once

#include <cmath>

#include "kernels/hd.h"

namespace mrmf::kernels {

struct SgdHyper {
  float lr = 0.f;
  float momentum = 0.f;
  float dampening = 0.f;
  float weight_decay = 0.f;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer is initialised to the gradient (torch: buf = clone(d_p))
};

// torch.optim.SGD, one element:
//   d = g + wd p
//   buf = first ? d : momentum buf + (1 - dampening) d      (only when momentum != 0)
//   d = nesterov ? d + momentum buf : buf
//   p -= lr d
struct SgdStep {
  float* p;
  const float* g;
  float* buf;  // null when momentum == 0
  SgdHyper h;
  MRMF_HD void operator()(int64_t i) const {
    float d = g[i];
    if (h.weight_decay != 0.f) d += h.weight_decay * p[i];
    if (h.momentum != 0.f) {
      const float b = h.first_step ? d : h.momentum * buf[i] + (1.f - h.dampening) * d;
      buf[i] = b;
      d = h.nesterov ? d + h.momentum * b : b;
    }
    p[i] -= h.lr * d;
  }
};

struct AdamHyper {
  float lr = 0.f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  bool decoupled = false;     // AdamW: p *= 1 - lr wd, instead of g += wd p
  float step_size = 0.f;      // lr / (1 - beta1^t)
  float bias2_sqrt = 1.f;     // sqrt(1 - beta2^t)
};

// torch.optim.Adam / AdamW (amsgrad = false), one element:
//   AdamW: p *= 1 - lr wd          Adam: g += wd p
//   m = beta1 m + (1 - beta1) g
//   v = beta2 v + (1 - beta2) g^2
//   p -= step_size m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
struct AdamStep {
  float* p;
  const float* g;
  float* m;
  float* v;
  AdamHyper h;
  MRMF_HD void operator()(int64_t i) const {
    float grad = g[i];
    float param = p[i];
    if (h.weight_decay != 0.f) {
      if (h.decoupled)
        param *= 1.f - h.lr * h.weight_decay;
      else
        grad += h.weight_decay * param;
    }
    const float mi = h.beta1 * m[i] + (1.f - h.beta1) * grad;
    const float vi = h.beta2 * v[i] + (1.f - h.beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / h.bias2_sqrt + h.eps;
    p[i] = param - h.step_size * mi / denom;
  }
};

}  // namespace mrmf::kernels
