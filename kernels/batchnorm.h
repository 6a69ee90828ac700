// Batch-normalization functors over [N, C, inner] (inner = L, D*H*W, or 1 for
// flat [N, F] inputs where C = F). Statistics are per channel over N and inner.
//
// Training: mean = E[x], var = E[(x - mean)^2] (biased, two-pass for accuracy)
// normalizes; the running variance gets the unbiased M / (M - 1) correction
// (PyTorch). Reductions go through segmented_sum, so they are deterministic.
#pragma once

#include <cmath>

#include "kernels/fastdiv.h"
#include "kernels/hd.h"

namespace mrmf::kernels {

// The one normalization expression, shared by BnApply and the fused epilogue
// so that fused and unfused paths round identically.
MRMF_HD MRMF_INLINE float bn_affine(float x, float mean, float invstd, float gamma, float beta) {
  return (x - mean) * (invstd * gamma) + beta;
}

// Index helper for [N, C, inner] with multiply-high division (kernels/fastdiv.h).
struct ChannelIndex {
  int64_t channels = 1, inner = 1;
  FastDiv inner_div, ch_div;
  ChannelIndex() = default;
  ChannelIndex(int64_t C, int64_t in) : channels(C), inner(in), inner_div(in), ch_div(C) {}  // host
  // Channel of flat element i.
  MRMF_HD MRMF_INLINE int64_t channel(int64_t i) const {
    const int64_t t = inner_div(i);
    return t - ch_div(t) * channels;
  }
  // Flat index of element j (over (n, k)) of channel c.
  MRMF_HD MRMF_INLINE int64_t flat(int64_t c, int64_t j) const {
    const int64_t n = inner_div(j);
    return (n * channels + c) * inner + (j - n * inner);
  }
};

// The reduction terms below are written at a flat element index (`at`); the
// CPU's segmented_sum walks each channel's contiguous rows of [N, C, inner]
// through it (kernels/launch_cpu.h), the GPU goes through operator().

// Reduction term: x[n, c, k] for segment c, j over (n, k) (also d beta with x = dy).
struct BnSumTerm {
  const float* x;
  ChannelIndex ci;
  MRMF_HD float at(int64_t, int64_t idx) const { return x[idx]; }
  MRMF_HD float operator()(int64_t c, int64_t j) const { return at(c, ci.flat(c, j)); }
};

// Reduction term: (x - mean[c])^2.
struct BnCenteredSquareTerm {
  const float* x;
  const float* mean;
  ChannelIndex ci;
  MRMF_HD float at(int64_t c, int64_t idx) const {
    const float d = x[idx] - mean[c];
    return d * d;
  }
  MRMF_HD float operator()(int64_t c, int64_t j) const { return at(c, ci.flat(c, j)); }
};

// Reduction term: dy * (x - mean) * invstd  (d gamma).
struct BnGammaGradTerm {
  const float* x;
  const float* dy;
  const float* mean;
  const float* invstd;
  ChannelIndex ci;
  MRMF_HD float at(int64_t c, int64_t idx) const { return dy[idx] * (x[idx] - mean[c]) * invstd[c]; }
  MRMF_HD float operator()(int64_t c, int64_t j) const { return at(c, ci.flat(c, j)); }
};

// mean[c] = sum[c] * inv_count (in place).
struct BnScale {
  float* v;
  float factor;
  MRMF_HD void operator()(int64_t c) const { v[c] *= factor; }
};

// Per channel, after the two reductions: sq holds sum (x - mean)^2 and is
// turned into invstd; running stats updated when running_mean is non-null.
struct BnFinalizeStats {
  const float* mean;
  float* sq_to_invstd;
  float* running_mean;  // may be null
  float* running_var;
  float count;  // M = N * inner
  float momentum;
  float eps;
  MRMF_HD void operator()(int64_t c) const {
    const float var = sq_to_invstd[c] / count;
    sq_to_invstd[c] = 1.f / sqrtf(var + eps);
    if (running_mean) {
      const float unbiased = count > 1.f ? var * count / (count - 1.f) : var;
      running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * mean[c];
      running_var[c] = (1.f - momentum) * running_var[c] + momentum * unbiased;
    }
  }
};

// invstd[c] = 1 / sqrt(var[c] + eps)   (eval mode, from the running variance)
struct BnInvStd {
  const float* var;
  float* invstd;
  float eps;
  MRMF_HD void operator()(int64_t c) const { invstd[c] = 1.f / sqrtf(var[c] + eps); }
};

// y = gamma * (x - mean) * invstd + beta
struct BnApply {
  const float* x;
  float* y;
  const float* mean;
  const float* invstd;
  const float* gamma;
  const float* beta;
  ChannelIndex ci;
  // Element i of channel c (the CPU's launch walks rows through this).
  MRMF_HD void at(int64_t c, int64_t i) const { y[i] = bn_affine(x[i], mean[c], invstd[c], gamma[c], beta[c]); }
  MRMF_HD void operator()(int64_t i) const { at(ci.channel(i), i); }
};

// Input gradient. With batch statistics (training):
//   dx = gamma * invstd / M * (M * dy - dbeta - xhat * dgamma),  xhat = (x - mean) * invstd
// With fixed (running) statistics the batch terms vanish: dx = gamma * invstd * dy.
struct BnBackwardInput {
  const float* x;
  const float* dy;
  float* dx;
  const float* mean;
  const float* invstd;
  const float* gamma;
  const float* dgamma;
  const float* dbeta;
  ChannelIndex ci;
  float count;
  bool batch_stats;
  MRMF_HD void at(int64_t c, int64_t i) const {
    const float k = gamma[c] * invstd[c];
    if (!batch_stats) {
      dx[i] = k * dy[i];
      return;
    }
    const float xhat = (x[i] - mean[c]) * invstd[c];
    dx[i] = k * (dy[i] - (dbeta[c] + xhat * dgamma[c]) / count);
  }
  MRMF_HD void operator()(int64_t i) const { at(ci.channel(i), i); }
};

// v[0] += 1 (num_batches_tracked, stored as float).
struct AddOne {
  float* v;
  MRMF_HD void operator()(int64_t) const { v[0] += 1.f; }
};

}  // namespace mrmf::kernels
