// Backend bodies for the batch-norm family; see kernels/dispatch.h.
#include "kernels/batchnorm.h"
#include "kernels/batchnorm_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

void batchnorm_stats(Stream& s, const Tensor& x, const Tensor& save_mean, const Tensor& save_invstd,
                     const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C), M = N * inner;
  const ChannelIndex ci(C, inner);
  float* mean = save_mean.data<float>();
  float* invstd = save_invstd.data<float>();
  segmented_sum(s.native(), C, M, BnSumTerm{x.data<float>(), ci}, mean);
  launch(s.native(), C, BnScale{mean, 1.f / static_cast<float>(M)});
  segmented_sum(s.native(), C, M, BnCenteredSquareTerm{x.data<float>(), mean, ci}, invstd);
  float* rm = running_mean.defined() ? running_mean.data<float>() : nullptr;
  float* rv = running_var.defined() ? running_var.data<float>() : nullptr;
  launch(s.native(), C,
         BnFinalizeStats{mean, invstd, rm, rv, static_cast<float>(M), static_cast<float>(momentum),
                         static_cast<float>(eps)});
}

void batchnorm_invstd(Stream& s, const Tensor& var, const Tensor& invstd, double eps) {
  launch(s.native(), var.numel(), BnInvStd{var.data<float>(), invstd.data<float>(), static_cast<float>(eps)});
}

void batchnorm_apply(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                     const Tensor& beta, const Tensor& y) {
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C);
  launch(s.native(), x.numel(),
         BnApply{x.data<float>(), y.data<float>(), mean.data<float>(), invstd.data<float>(), gamma.data<float>(),
                 beta.data<float>(), ChannelIndex(C, inner)});
}

void batchnorm_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                        const Tensor& gamma, bool batch_stats, const Tensor& dx, const Tensor& dgamma,
                        const Tensor& dbeta) {
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C), M = N * inner;
  const ChannelIndex ci(C, inner);
  segmented_sum(s.native(), C, M, BnSumTerm{dy.data<float>(), ci}, dbeta.data<float>());
  segmented_sum(s.native(), C, M,
                BnGammaGradTerm{x.data<float>(), dy.data<float>(), mean.data<float>(), invstd.data<float>(), ci},
                dgamma.data<float>());
  if (!dx.defined()) return;
  launch(s.native(), x.numel(),
         BnBackwardInput{x.data<float>(), dy.data<float>(), dx.data<float>(), mean.data<float>(), invstd.data<float>(),
                         gamma.data<float>(), dgamma.data<float>(), dbeta.data<float>(), ci,
                         static_cast<float>(M), batch_stats});
}

void increment(Stream& s, const Tensor& counter) { launch(s.native(), 1, AddOne{counter.data<float>()}); }

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
