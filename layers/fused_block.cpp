#include "layers/fused_block.h"

#include "kernels/batchnorm_ops.h"

namespace mrmf {

BnActPool::BnActPool(const BnActPoolOptions& opt) : opt_(opt) {
  MRMF_CHECK_KIND(Usage, opt.spatial_dims == 1 || opt.spatial_dims == 3, "BnActPool: spatial_dims must be 1 or 3, got ",
                  opt.spatial_dims);
  MRMF_CHECK_KIND(Usage, opt.bn_channels >= 0, "BnActPool: negative bn_channels ", opt.bn_channels);
  MRMF_CHECK_KIND(Usage, opt.pool == kernels::PoolKind::None || opt.pool_params.nd == opt.spatial_dims,
                  "BnActPool: ", opt.pool_params.nd, "-D pooling on ", opt.spatial_dims, "-D input");
  MRMF_CHECK_KIND(Usage, opt.eps > 0 && opt.momentum >= 0 && opt.momentum <= 1, "BnActPool: invalid eps ", opt.eps,
                  " / momentum ", opt.momentum);
}

kernels::EpilogueSpec BnActPool::spec() const {
  kernels::EpilogueSpec s;
  s.act = opt_.act;
  s.slope = opt_.slope;
  s.pool = opt_.pool;
  s.pool_params = opt_.pool_params;
  return s;
}

void BnActPool::register_params(ParamStore& store, const std::string& prefix, ParamGroup group) {
  store_ = &store;
  if (opt_.bn_channels > 0) ids_.register_in(store, prefix, group, opt_.bn_channels);
}

void BnActPool::init_params(uint64_t, InitScheme) {
  if (opt_.bn_channels > 0) ids_.init(*store_);
}

void BnActPool::check(const Shape& s) const {
  MRMF_CHECK_KIND(Shape, s.ndim() == 2 + opt_.spatial_dims, who(), ": expected input ",
                  opt_.spatial_dims == 1 ? "[N, C, L]" : "[N, C, D, H, W]", ", got ", s.str());
  if (opt_.bn_channels > 0)
    MRMF_CHECK_KIND(Shape, s[1] == opt_.bn_channels, who(), ": expected C = ", opt_.bn_channels, ", got input ",
                    s.str());
}

Shape BnActPool::output_shape(const Shape& in) const {
  check(in);
  return kernels::fused_epilogue_output_shape(in, spec(), who());
}

std::optional<CentreMap> BnActPool::centre_map(int axis) const {
  if (axis < 0 || axis >= opt_.spatial_dims) return std::nullopt;
  if (opt_.pool == kernels::PoolKind::None) return CentreMap{};  // BN and activation: pointwise
  const kernels::PoolParams& p = opt_.pool_params;
  return window_centre_map(p.kernel[axis], p.stride[axis], p.padding[axis]);
}

Tensor BnActPool::forward(Context& ctx, const Tensor& x_in) {
  const Shape out = output_shape(x_in.shape());
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  Stream& s = ctx.stream();
  const bool bn = opt_.bn_channels > 0;
  Tensor mean, invstd, gamma, beta;
  if (bn) {
    MRMF_CHECK(store_ && store_->finalized(), who(), ": used before its model was built");
    gamma = store_->value(ids_.weight);
    beta = store_->value(ids_.bias);
    const Tensor rm = store_->value(ids_.running_mean), rv = store_->value(ids_.running_var);
    const int64_t C = opt_.bn_channels;
    invstd = Tensor::empty({C}, DType::F32, x.device());
    if (ctx.training()) {
      MRMF_CHECK_KIND(Shape, x.numel() / C > 1, who(), ": expected more than 1 value per channel when training, got ",
                      x.shape().str());
      mean = Tensor::empty({C}, DType::F32, x.device());
      kernels::batchnorm_stats(s, x, mean, invstd, rm, rv, ctx.bn_momentum(opt_.momentum), opt_.eps);
      kernels::increment(s, store_->value(ids_.num_batches_tracked));
    } else {
      mean = rm;
      kernels::batchnorm_invstd(s, rv, invstd, opt_.eps);
    }
  }
  Tensor y = Tensor::empty(out, DType::F32, x.device());
  Tensor argmax;
  if (opt_.pool == kernels::PoolKind::Max && ctx.training()) argmax = Tensor::empty(out, DType::I32, x.device());
  kernels::fused_epilogue_forward(s, x, mean, invstd, gamma, beta, y, argmax, spec());
  if (ctx.training()) {
    x_ = x;
    mean_ = mean;
    invstd_ = invstd;
    argmax_ = argmax;
    saved_ = true;
  } else {
    clear_saved();
  }
  return y;
}

Tensor BnActPool::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  MRMF_CHECK(saved_, who(), ": backward without a training-mode forward");
  const Shape out = kernels::fused_epilogue_output_shape(x_.shape(), spec(), who());
  MRMF_CHECK_KIND(Shape, dy_in.shape() == out, who(), ": gradient ", dy_in.shape().str(), " does not match the output ",
                  out.str(), " of the forward input ", x_.shape().str());
  const Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
  const bool bn = opt_.bn_channels > 0;
  if (!bn && !need_dx) {
    clear_saved();
    return Tensor();
  }
  Tensor gamma, beta;
  if (bn) {
    gamma = store_->value(ids_.weight);
    beta = store_->value(ids_.bias);
  }
  // dz = dL/d bn(x): pool gather times the activation derivative, one pass.
  Tensor dz = Tensor::empty(x_.shape(), DType::F32, dy.device());
  kernels::fused_epilogue_backward(ctx.stream(), x_, dy, argmax_, mean_, invstd_, gamma, beta, dz, spec());
  Tensor dx = dz;
  if (bn) {
    // BN backward reads dz[i] and writes dx[i] at the same index after its
    // reductions, so dx overwrites dz in place.
    kernels::batchnorm_backward(ctx.stream(), x_, dz, mean_, invstd_, gamma, /*batch_stats=*/true,
                                need_dx ? dz : Tensor(), store_->grad(ids_.weight), store_->grad(ids_.bias));
  }
  clear_saved();
  return need_dx ? dx : Tensor();
}

void BnActPool::clear_saved() {
  x_ = mean_ = invstd_ = argmax_ = Tensor();
  saved_ = false;
}

}  // namespace mrmf
