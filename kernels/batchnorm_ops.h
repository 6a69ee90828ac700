// Batch-normalization ops over [N, C, ...] float32 contiguous tensors (a flat
// [N, F] input is C = F with no spatial dims); per-channel tensors are [C].
// Dispatch on the stream's device. See kernels/batchnorm.h for the math.
#pragma once

#include "kernels/dispatch.h"

namespace mrmf::kernels {

MRMF_BOTH_BACKENDS(void batchnorm_stats(Stream& s, const Tensor& x, const Tensor& save_mean,
                                        const Tensor& save_invstd, const Tensor& running_mean,
                                        const Tensor& running_var, double momentum, double eps))
MRMF_BOTH_BACKENDS(void batchnorm_invstd(Stream& s, const Tensor& var, const Tensor& invstd, double eps))
MRMF_BOTH_BACKENDS(void batchnorm_apply(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                        const Tensor& gamma, const Tensor& beta, const Tensor& y))
MRMF_BOTH_BACKENDS(void batchnorm_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& mean,
                                           const Tensor& invstd, const Tensor& gamma, bool batch_stats,
                                           const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta))
MRMF_BOTH_BACKENDS(void increment(Stream& s, const Tensor& counter))

// Batch statistics: save_mean = mean, save_invstd = 1/sqrt(biased var + eps).
// When running_mean/running_var are defined they are updated in place:
//   running = (1 - momentum) * running + momentum * stat  (unbiased variance).
void batchnorm_stats(Stream& s, const Tensor& x, const Tensor& save_mean, const Tensor& save_invstd,
                     const Tensor& running_mean, const Tensor& running_var, double momentum, double eps);
// invstd = 1 / sqrt(var + eps) (eval mode from the running variance).
void batchnorm_invstd(Stream& s, const Tensor& var, const Tensor& invstd, double eps);
// y = gamma * (x - mean) * invstd + beta; y may alias x.
void batchnorm_apply(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                     const Tensor& beta, const Tensor& y);
// dgamma = sum dy * xhat, dbeta = sum dy (overwritten); dx (skipped when
// undefined) through the batch statistics when batch_stats, else through the
// fixed statistics (eval mode).
void batchnorm_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                        const Tensor& gamma, bool batch_stats, const Tensor& dx, const Tensor& dgamma,
                        const Tensor& dbeta);
// counter[0] += 1 on the device (num_batches_tracked).
void increment(Stream& s, const Tensor& counter);

}  // namespace mrmf::kernels
