// cuDNN batch normalization (see layers/batchnorm_cudnn.h).
//
// Descriptors are created per call: a handful of host-side calls, cheap next
// to the kernels, and it keeps these functions stateless.
#include <algorithm>

#include "core/check_cuda.h"
#include "kernels/dispatch.h"
#include "layers/batchnorm_cudnn.h"
#include "layers/cudnn_descriptors.h"
#include "layers/gpu_handles.h"

namespace mrmf::cudnn_bn {

namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

// cuDNN refuses eps below CUDNN_BN_MIN_EPSILON; the same clamped value must
// be used in forward and backward.
double clamp_eps(double eps) { return std::max(eps, static_cast<double>(CUDNN_BN_MIN_EPSILON)); }

void check_args(const char* op, Context& ctx, const Tensor& x, std::initializer_list<const Tensor*> same_as_x,
                std::initializer_list<const Tensor*> per_channel) {
  MRMF_CHECK_KIND(Device, ctx.device().is_cuda(), op, ": context on ", ctx.device().str(), ", expected CUDA");
  kernels::check_devices(op, ctx.stream(), {&x});
  kernels::check_devices(op, ctx.stream(), same_as_x);
  kernels::check_devices(op, ctx.stream(), per_channel);
  kernels::check_f32_contiguous(op, {&x});
  kernels::check_f32_contiguous(op, same_as_x);
  kernels::check_f32_contiguous(op, per_channel);
  MRMF_CHECK_KIND(Shape, x.ndim() >= 2 && x.ndim() <= 5, op,
                  ": expected [N, C], [N, C, L], [N, C, H, W] or "
                  "[N, C, D, H, W], got ",
                  x.shape().str());
  for (const Tensor* t : same_as_x)
    MRMF_CHECK_KIND(Shape, t->shape() == x.shape(), op, ": ", t->shape().str(), " does not match the input ",
                    x.shape().str());
  for (const Tensor* t : per_channel)
    MRMF_CHECK_KIND(Shape, t->numel() == x.size(1), op, ": per-channel tensor ", t->shape().str(),
                    " does not match C = ", x.size(1), " of ", x.shape().str());
}

// x's descriptor and the derived [1, C, 1, 1(, 1)] scale/bias/statistics descriptor.
struct Descs {
  cudnn::TensorDesc x, bn;
  explicit Descs(const Shape& s) : x(s) { MRMF_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bn, x, kMode)); }
};

}  // namespace

void forward_training(Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                      const Tensor& running_mean, const Tensor& running_var, double momentum, double eps,
                      const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
  check_args("cudnn_bn::forward_training", ctx, x, {&y},
             {&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd});
  // The unbiased running variance divides by (count - 1), like PyTorch's check.
  MRMF_CHECK_KIND(Shape, x.numel() / x.size(1) > 1,
                  "cudnn_bn::forward_training: expected more than 1 value per "
                  "channel when training, got input ",
                  x.shape().str());
  Descs d(x.shape());
  const float one = 1.f, zero = 0.f;
  // cuDNN's exponentialAverageFactor is PyTorch's momentum:
  // running = (1 - factor) * running + factor * batch (unbiased variance).
  MRMF_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      ctx.gpu().cudnn, kMode, &one, &zero, d.x, x.raw_data(), d.x, y.raw_data(), d.bn, gamma.raw_data(),
      beta.raw_data(), momentum, running_mean.raw_data(), running_var.raw_data(), clamp_eps(eps), save_mean.raw_data(),
      save_invstd.raw_data()));
}

void forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const Tensor& running_mean, const Tensor& running_var, double eps, const Tensor& y) {
  check_args("cudnn_bn::forward_inference", ctx, x, {&y}, {&gamma, &beta, &running_mean, &running_var});
  Descs d(x.shape());
  const float one = 1.f, zero = 0.f;
  MRMF_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      ctx.gpu().cudnn, kMode, &one, &zero, d.x, x.raw_data(), d.x, y.raw_data(), d.bn, gamma.raw_data(),
      beta.raw_data(), running_mean.raw_data(), running_var.raw_data(), clamp_eps(eps)));
}

void backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
              const Tensor& save_invstd, double eps, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  check_args("cudnn_bn::backward", ctx, x, {&dy, &dx}, {&gamma, &save_mean, &save_invstd, &dgamma, &dbeta});
  Descs d(x.shape());
  const float one = 1.f, zero = 0.f;  // beta = 0 for dx and the parameter gradients: overwrite
  MRMF_CUDNN_CHECK(cudnnBatchNormalizationBackward(ctx.gpu().cudnn, kMode, &one, &zero, &one, &zero, d.x, x.raw_data(),
                                                   d.x, dy.raw_data(), d.x, dx.raw_data(), d.bn, gamma.raw_data(),
                                                   dgamma.raw_data(), dbeta.raw_data(), clamp_eps(eps),
                                                   save_mean.raw_data(), save_invstd.raw_data()));
}

}  // namespace mrmf::cudnn_bn
