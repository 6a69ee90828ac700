#include "layers/linear.h"

#include "kernels/elementwise_ops.h"
#include "layers/cpu_sgemm.h"
#ifdef MRMF_HAVE_CUDA
#include "layers/linear_cublas.h"
#endif

namespace mrmf {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  MRMF_CHECK_KIND(Shape, in_features > 0 && out_features > 0, "Linear: features must be positive, got in = ",
                  in_features, ", out = ", out_features);
}

void Linear::register_params(ParamStore& store, const std::string& prefix, ParamGroup group) {
  store_ = &store;
  w_id_ = store.add_param(prefix + "weight", Shape{out_, in_}, group);
  if (has_bias_) b_id_ = store.add_param(prefix + "bias", Shape{out_}, group);
}

void Linear::init_params(uint64_t seed, InitScheme scheme) {
  MRMF_CHECK(store_ && w_id_ >= 0, "Linear '", name(), "': init_params before register_params");
  // Stream ids from the store offsets: distinct for every tensor of a model.
  const auto stream_of = [&](ParamId id) { return static_cast<uint64_t>(store_->info(id).offset); };
  if (scheme == InitScheme::GlorotUniform) {
    init_uniform(weight(), glorot_bound(in_, out_), seed, stream_of(w_id_));
    if (has_bias_) bias().zero_();
  } else {
    const float bound = pytorch_default_bound(in_);
    init_uniform(weight(), bound, seed, stream_of(w_id_));
    if (has_bias_) init_uniform(bias(), bound, seed, stream_of(b_id_));
  }
}

Tensor Linear::weight() const {
  MRMF_CHECK(store_ && w_id_ >= 0, "Linear '", name(), "': parameters not registered");
  return store_->value(w_id_);
}

Tensor Linear::bias() const { return has_bias_ ? store_->value(b_id_) : Tensor(); }

Shape Linear::output_shape(const Shape& in) const {
  MRMF_CHECK_KIND(Shape, in.ndim() == 2 && in[1] == in_, type(), " '", name(), "': expected input [N, ", in_,
                  "], got ", in.str());
  return Shape{in[0], out_};
}

void Linear::check_x(const Tensor& x) const {
  MRMF_CHECK_KIND(Shape, x.ndim() == 2 && x.size(1) == in_, type(), " '", name(), "': expected input [N, ", in_,
                  "], got ", x.shape().str());
  MRMF_CHECK_KIND(Shape, x.dtype() == DType::F32, type(), " '", name(), "': expected float32 input, got ", x.str());
}

Tensor Linear::forward(Context& ctx, const Tensor& x_in) {
  MRMF_CHECK(store_ && store_->finalized(), "Linear '", name(), "': forward before the model was built");
  check_x(x_in);
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  const Tensor w = weight();
  kernels::check_devices("Linear forward", ctx.stream(), {&x, &w});
  const int64_t N = x.size(0);
  Tensor y = Tensor::empty({N, out_}, DType::F32, x.device());
  if (N > 0) {
    if (ctx.device().is_cuda()) {
#ifdef MRMF_HAVE_CUDA
      linear_gpu::forward(ctx, x.data<float>(), w.data<float>(), y.data<float>(), N, in_, out_);
#else
      kernels::no_cuda_backend("Linear forward");
#endif
    } else {
      cpu_sgemm('N', 'T', N, out_, in_, x.data<float>(), in_, w.data<float>(), in_, y.data<float>(), out_);
    }
    if (has_bias_) kernels::bias_add(ctx.stream(), y, bias());
  }
  if (ctx.training()) x_ = x;
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  MRMF_CHECK(x_.defined(), type(), " '", name(), "': backward without a training-mode forward");
  const int64_t N = x_.size(0);
  MRMF_CHECK_KIND(Shape, dy_in.ndim() == 2 && dy_in.size(0) == N && dy_in.size(1) == out_, type(), " '", name(),
                  "': expected output gradient [", N, ", ", out_, "], got ", dy_in.shape().str());
  const Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
  const Tensor w = weight();
  Tensor dw = store_->grad(w_id_);
  kernels::check_devices("Linear backward", ctx.stream(), {&dy, &w});
  kernels::check_f32_contiguous("Linear backward", {&dy});
  Tensor dx;
  if (need_dx) dx = Tensor::empty({N, in_}, DType::F32, dy.device());
  const bool gpu = ctx.device().is_cuda();
  if (N == 0) {
    dw.zero_(ctx.stream());  // an empty batch contributes nothing (and GEMMs with K = 0 are not portable)
  } else if (gpu) {
#ifdef MRMF_HAVE_CUDA
    linear_gpu::backward_weight(ctx, dy.data<float>(), x_.data<float>(), dw.data<float>(), N, in_, out_);
    if (need_dx) linear_gpu::backward_input(ctx, dy.data<float>(), w.data<float>(), dx.data<float>(), N, in_, out_);
#else
    kernels::no_cuda_backend("Linear backward");
#endif
  } else {
    // dW[out, in] = dY^T[out, N] X[N, in]
    cpu_sgemm('T', 'N', out_, in_, N, dy.data<float>(), out_, x_.data<float>(), in_, dw.data<float>(), in_);
    // dX[N, in] = dY[N, out] W[out, in]
    if (need_dx) cpu_sgemm('N', 'N', N, in_, out_, dy.data<float>(), out_, w.data<float>(), in_, dx.data<float>(), in_);
  }
  if (has_bias_) {
    Tensor db = store_->grad(b_id_);
    if (N == 0)
      db.zero_(ctx.stream());  // bias_grad divides by N
    else
      kernels::bias_grad(ctx.stream(), dy, db);
  }
  x_ = Tensor();
  return dx;
}

}  // namespace mrmf
