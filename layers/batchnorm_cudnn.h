// cuDNN batch normalization (CUDA builds only; implemented in
// layers/batchnorm_cudnn_cuda.cpp). The BatchNorm layer calls these for CUDA
// tensors; this header includes nothing CUDA-specific so CPU translation
// units may include it under #ifdef MRMF_HAVE_CUDA.
//
// All tensors are contiguous float32 on the context's CUDA device.
//   x, y, dy, dx: [N, C], [N, C, L] or [N, C, D, H, W]. A flat [N, F] vector is
//     described to cuDNN as [N, F, 1, 1], so SPATIAL mode is per-feature BN.
//   gamma, beta, running_mean, running_var, save_mean, save_invstd,
//   dgamma, dbeta: [C].
// Semantics follow PyTorch: running statistics are updated as
//   running = (1 - momentum) * running + momentum * batch_stat,
// with the unbiased (N*spatial - 1 denominator) batch variance; the
// normalization itself uses the biased variance. eps below cuDNN's
// CUDNN_BN_MIN_EPSILON is raised to it (cuDNN rejects smaller values).
// dgamma/dbeta are overwritten, not accumulated.
#pragma once

#include "core/tensor.h"
#include "layers/context.h"

namespace mrmf::cudnn_bn {

// y = gamma * (x - mean) * invstd + beta with batch statistics; saves the
// batch mean and inverse standard deviation for backward.
void forward_training(Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                      const Tensor& running_mean, const Tensor& running_var, double momentum, double eps,
                      const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd);

// y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta.
void forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const Tensor& running_mean, const Tensor& running_var, double eps, const Tensor& y);

// Gradients of forward_training given the saved statistics.
void backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
              const Tensor& save_invstd, double eps, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta);

}  // namespace mrmf::cudnn_bn
