// Fused BN + activation + pooling epilogue ops (see kernels/fused_epilogue.h).
// x: [N, C, L] or [N, C, D, H, W] (any [N, C, ...] without pooling), float32
// contiguous. BN statistics/coefficients are [C] tensors, all four defined or
// all undefined (no BN).
#pragma once

#include "kernels/dispatch.h"
#include "kernels/pooling_ops.h"

namespace mrmf::kernels {

struct EpilogueSpec {
  bool act = true;      // LeakyReLU(slope) after BN
  float slope = 0.f;    // 0 = ReLU
  PoolKind pool = PoolKind::None;
  PoolParams pool_params;  // used when pool != None
};

// Resolved form handed to the backends.
struct EpilogueGeom {
  bool act = true;
  float slope = 0.f;
  PoolKind pool = PoolKind::None;
  PoolGeom g;  // pool geometry; without pooling only channels/planes are used
};

MRMF_BOTH_BACKENDS(void fused_epilogue_forward(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& y,
                                               const Tensor& argmax, const EpilogueGeom& e))
MRMF_BOTH_BACKENDS(void fused_epilogue_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& argmax,
                                                const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                                                const Tensor& beta, const Tensor& dz, const EpilogueGeom& e))

// Output shape (pooled when spec.pool != None); errors prefixed with `who`.
Shape fused_epilogue_output_shape(const Shape& in, const EpilogueSpec& spec, const std::string& who);
// y = pool(act(bn(x))). argmax (int32, shape of y) is required for max
// pooling when a backward pass follows; may be undefined otherwise.
void fused_epilogue_forward(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                            const Tensor& beta, const Tensor& y, const Tensor& argmax, const EpilogueSpec& spec);
// dz = dL/d bn(x) (= dL/dx without BN), shape of x; feed it to batchnorm_backward.
void fused_epilogue_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& argmax, const Tensor& mean,
                             const Tensor& invstd, const Tensor& gamma, const Tensor& beta, const Tensor& dz,
                             const EpilogueSpec& spec);

}  // namespace mrmf::kernels
