// The fused conv epilogue: y = pool(act(bn(x))) in one pass over x.
//   bn   optional per-channel affine with given statistics (bn_affine, the same
//        expression BnApply uses, so fused == unfused to the last bit)
//   act  identity or LeakyReLU(slope) (slope 0 = ReLU)
//   pool none, max or average (kernels/pooling.h loops, with this loader)
// Backward gathers the pool gradient per input element and multiplies by the
// activation derivative at z = bn(x) (recomputed, not stored), producing
// dz = dL/d bn(x); BN's own backward (batchnorm_backward) then maps dz to dx.
// Since ReLU is monotone, maxpool(relu(x)) == relu(maxpool(x)), so this also
// serves conv -> maxpool -> ReLU blocks (Neuron Inverter).
#pragma once

#include "kernels/batchnorm.h"
#include "kernels/pooling.h"

namespace mrmf::kernels {

struct BnActParams {
  const float* x = nullptr;
  // BN coefficients; mean == nullptr means "no BN".
  const float* mean = nullptr;
  const float* invstd = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  bool act = false;   // apply LeakyReLU
  float slope = 0.f;  // 0 = ReLU
  int64_t channels = 1;
  MRMF_HD MRMF_INLINE float pre(int64_t idx, int64_t c) const {
    const float v = x[idx];
    return mean ? bn_affine(v, mean[c], invstd[c], gamma[c], beta[c]) : v;
  }
  // The element-wise LeakyReLU expressions (hd.h), so fused == unfused.
  MRMF_HD MRMF_INLINE float activate(float z) const { return act ? leaky_relu_value(z, slope) : z; }
  MRMF_HD MRMF_INLINE float grad(float g, float z) const { return act ? leaky_relu_grad(g, z, slope) : g; }
  // Derivative convention as LeakyReluBackward: slope at z == 0.
  MRMF_HD MRMF_INLINE float dact(float z) const { return act && !(z > 0.f) ? slope : 1.f; }
};

// Loader for the pooling loops: act(bn(x[idx])).
struct LoadBnAct {
  static constexpr bool kNeedsChannel = true;
  BnActParams p;
  MRMF_HD float operator()(int64_t idx, int64_t c) const { return p.activate(p.pre(idx, c)); }
};

// Post-processor for the pooling backward loops: g * act'(bn(x[idx])).
struct PostBnAct {
  static constexpr bool kNeedsChannel = true;
  BnActParams p;
  MRMF_HD float operator()(int64_t idx, int64_t c, float g) const {
    return p.act ? p.grad(g, p.pre(idx, c)) : g;
  }
};

// No pooling: y[i] = act(bn(x[i])) over [N, C, inner].
struct BnActForward {
  BnActParams p;
  float* y;
  ChannelIndex ci;
  MRMF_HD void operator()(int64_t i) const {
    const int64_t c = ci.channel(i);
    y[i] = p.activate(p.pre(i, c));
  }
};

// No pooling: dz[i] = dy[i] * act'(bn(x[i])).
struct BnActBackward {
  BnActParams p;
  const float* dy;
  float* dz;
  ChannelIndex ci;
  MRMF_HD void operator()(int64_t i) const {
    const int64_t c = ci.channel(i);
    dz[i] = p.act ? p.grad(dy[i], p.pre(i, c)) : dy[i];
  }
};

}  // namespace mrmf::kernels
