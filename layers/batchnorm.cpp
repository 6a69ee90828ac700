#include "layers/batchnorm.h"

#include "kernels/batchnorm_ops.h"
#ifdef MRMF_HAVE_CUDA
#include "layers/batchnorm_cudnn.h"
#endif

namespace mrmf {

void BnParamIds::register_in(ParamStore& store, const std::string& prefix, ParamGroup group, int64_t channels) {
  weight = store.add_param(prefix + "weight", Shape{channels}, group);
  bias = store.add_param(prefix + "bias", Shape{channels}, group);
  running_mean = store.add_buffer(prefix + "running_mean", Shape{channels}, group);
  running_var = store.add_buffer(prefix + "running_var", Shape{channels}, group);
  num_batches_tracked = store.add_buffer(prefix + "num_batches_tracked", Shape{}, group);
}

void BnParamIds::init(ParamStore& store) const {
  // Once per model: fill on the host and copy over (works for any device).
  auto set = [&](ParamId id, float v) {
    Tensor dst = store.value(id);
    dst.copy_from(Tensor::full(dst.shape(), v));
  };
  set(weight, 1.f);
  set(bias, 0.f);
  set(running_mean, 0.f);
  set(running_var, 1.f);
  set(num_batches_tracked, 0.f);
}

BatchNorm::BatchNorm(int64_t num_features, int spatial_dims, double eps, double momentum)
    : features_(num_features), spatial_dims_(spatial_dims), eps_(eps), momentum_(momentum) {
  MRMF_CHECK_KIND(Usage, num_features > 0, "BatchNorm: num_features must be positive, got ", num_features);
  MRMF_CHECK_KIND(Usage, spatial_dims == 1 || spatial_dims == 3, "BatchNorm: spatial_dims must be 1 or 3, got ",
                  spatial_dims);
  MRMF_CHECK_KIND(Usage, eps > 0 && momentum >= 0 && momentum <= 1, "BatchNorm: invalid eps ", eps, " / momentum ",
                  momentum);
}

void BatchNorm::register_params(ParamStore& store, const std::string& prefix, ParamGroup group) {
  store_ = &store;
  ids_.register_in(store, prefix, group, features_);
}

void BatchNorm::init_params(uint64_t, InitScheme) { ids_.init(*store_); }

void BatchNorm::check(const Shape& s) const {
  const bool rank_ok = spatial_dims_ == 3 ? s.ndim() == 5 : (s.ndim() == 2 || s.ndim() == 3);
  MRMF_CHECK_KIND(Shape, rank_ok && s[1] == features_, type(), " '", name(), "': expected input ",
                  spatial_dims_ == 3 ? "[N, C, D, H, W]" : "[N, F] or [N, C, L]", " with C = ", features_, ", got ",
                  s.str());
}

Shape BatchNorm::output_shape(const Shape& in) const {
  check(in);
  return in;
}

Tensor BatchNorm::forward(Context& ctx, const Tensor& x_in) {
  MRMF_CHECK(store_ && store_->finalized(), type(), " '", name(), "': used before its model was built");
  check(x_in.shape());
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  Stream& s = ctx.stream();
  const Tensor gamma = store_->value(ids_.weight), beta = store_->value(ids_.bias);
  const Tensor rm = store_->value(ids_.running_mean), rv = store_->value(ids_.running_var);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  if (ctx.training()) {
    const int64_t per_channel = x.numel() / features_;
    MRMF_CHECK_KIND(Shape, per_channel > 1, type(), " '", name(),
                    "': expected more than 1 value per channel when training, got input ", x.shape().str());
    save_mean_ = Tensor::empty({features_}, DType::F32, x.device());
    save_invstd_ = Tensor::empty({features_}, DType::F32, x.device());
#ifdef MRMF_HAVE_CUDA
    if (use_cudnn(x)) {
      cudnn_bn::forward_training(ctx, x, gamma, beta, rm, rv, ctx.bn_momentum(momentum_), eps_, y, save_mean_,
                                 save_invstd_);
    } else
#endif
    {
      kernels::batchnorm_stats(s, x, save_mean_, save_invstd_, rm, rv, ctx.bn_momentum(momentum_), eps_);
      kernels::batchnorm_apply(s, x, save_mean_, save_invstd_, gamma, beta, y);
    }
    kernels::increment(s, store_->value(ids_.num_batches_tracked));
    x_ = x;
  } else {
#ifdef MRMF_HAVE_CUDA
    if (use_cudnn(x)) {
      cudnn_bn::forward_inference(ctx, x, gamma, beta, rm, rv, eps_, y);
    } else
#endif
    {
      Tensor invstd = Tensor::empty({features_}, DType::F32, x.device());
      kernels::batchnorm_invstd(s, rv, invstd, eps_);
      kernels::batchnorm_apply(s, x, rm, invstd, gamma, beta, y);
    }
    clear_saved();
  }
  return y;
}

Tensor BatchNorm::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  MRMF_CHECK(x_.defined(), type(), " '", name(), "': backward without a training-mode forward");
  MRMF_CHECK_KIND(Shape, dy_in.shape() == x_.shape(), type(), " '", name(), "': gradient ", dy_in.shape().str(),
                  " does not match the forward input ", x_.shape().str());
  const Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
  const Tensor gamma = store_->value(ids_.weight);
  const Tensor dgamma = store_->grad(ids_.weight), dbeta = store_->grad(ids_.bias);
  Tensor dx;
#ifdef MRMF_HAVE_CUDA
  if (use_cudnn(dy)) {
    dx = Tensor::empty(x_.shape(), DType::F32, dy.device());  // cuDNN always writes dx
    cudnn_bn::backward(ctx, x_, dy, gamma, save_mean_, save_invstd_, eps_, dx, dgamma, dbeta);
  } else
#endif
  {
    if (need_dx) dx = Tensor::empty(x_.shape(), DType::F32, dy.device());
    kernels::batchnorm_backward(ctx.stream(), x_, dy, save_mean_, save_invstd_, gamma, /*batch_stats=*/true, dx,
                                dgamma, dbeta);
  }
  clear_saved();
  return need_dx ? dx : Tensor();
}

void BatchNorm::clear_saved() {
  x_ = Tensor();
  save_mean_ = Tensor();
  save_invstd_ = Tensor();
}

}  // namespace mrmf
