// CPU instantiation of the batch-norm family, plus the public checked entry
// points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/batchnorm_ops.inl"

namespace mrmf::kernels {
namespace {
void check_layout(const char* op, const Tensor& x) {
  MRMF_CHECK_KIND(Shape, x.ndim() >= 2 && x.size(0) > 0 && x.size(1) > 0, op, ": expected [N, C, ...], got ",
                  x.shape().str());
}
void check_channels(const char* op, const Tensor& x, std::initializer_list<const Tensor*> per_channel) {
  for (const Tensor* t : per_channel) {
    if (!t->defined()) continue;
    MRMF_CHECK_KIND(Shape, t->numel() == x.size(1), op, ": per-channel tensor ", t->str(),
                    " does not match the channels of ", x.shape().str());
  }
}
}  // namespace

void batchnorm_stats(Stream& s, const Tensor& x, const Tensor& save_mean, const Tensor& save_invstd,
                     const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  const char* op = "batchnorm_stats";
  check_devices(op, s, {&x, &save_mean, &save_invstd, &running_mean, &running_var});
  check_f32_contiguous(op, {&x, &save_mean, &save_invstd, &running_mean, &running_var});
  check_layout(op, x);
  check_channels(op, x, {&save_mean, &save_invstd, &running_mean, &running_var});
  MRMF_CHECK(running_mean.defined() == running_var.defined(), op, ": running mean and variance go together");
  MRMF_DISPATCH(s, batchnorm_stats(s, x, save_mean, save_invstd, running_mean, running_var, momentum, eps));
}

void batchnorm_invstd(Stream& s, const Tensor& var, const Tensor& invstd, double eps) {
  check_devices("batchnorm_invstd", s, {&var, &invstd});
  check_f32_contiguous("batchnorm_invstd", {&var, &invstd});
  MRMF_CHECK_KIND(Shape, var.numel() == invstd.numel(), "batchnorm_invstd: ", var.str(), " vs ", invstd.str());
  MRMF_DISPATCH(s, batchnorm_invstd(s, var, invstd, eps));
}

void batchnorm_apply(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                     const Tensor& beta, const Tensor& y) {
  const char* op = "batchnorm_apply";
  check_devices(op, s, {&x, &mean, &invstd, &gamma, &beta, &y});
  check_f32_contiguous(op, {&x, &mean, &invstd, &gamma, &beta, &y});
  check_layout(op, x);
  check_channels(op, x, {&mean, &invstd, &gamma, &beta});
  MRMF_CHECK_KIND(Shape, y.numel() == x.numel(), op, ": output ", y.str(), " vs input ", x.str());
  MRMF_DISPATCH(s, batchnorm_apply(s, x, mean, invstd, gamma, beta, y));
}

void batchnorm_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                        const Tensor& gamma, bool batch_stats, const Tensor& dx, const Tensor& dgamma,
                        const Tensor& dbeta) {
  const char* op = "batchnorm_backward";
  check_devices(op, s, {&x, &dy, &mean, &invstd, &gamma, &dx, &dgamma, &dbeta});
  check_f32_contiguous(op, {&x, &dy, &mean, &invstd, &gamma, &dx, &dgamma, &dbeta});
  check_layout(op, x);
  check_channels(op, x, {&mean, &invstd, &gamma, &dgamma, &dbeta});
  MRMF_CHECK_KIND(Shape, dy.shape() == x.shape() && (!dx.defined() || dx.numel() == x.numel()), op, ": input ",
                  x.shape().str(), ", output gradient ", dy.shape().str(), ", input gradient ", dx.str());
  MRMF_DISPATCH(s, batchnorm_backward(s, x, dy, mean, invstd, gamma, batch_stats, dx, dgamma, dbeta));
}

void increment(Stream& s, const Tensor& counter) {
  check_devices("increment", s, {&counter});
  check_f32_contiguous("increment", {&counter});
  MRMF_CHECK_KIND(Shape, counter.numel() >= 1, "increment: empty counter");
  MRMF_DISPATCH(s, increment(s, counter));
}

}  // namespace mrmf::kernels
