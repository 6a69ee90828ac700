#include "layers/dropout.h"

#include "kernels/dropout.h"
#include "kernels/dropout_ops.h"

namespace mrmf {

uint32_t dropout_layer_id(const std::string& path) {
  uint32_t h = 2166136261u;
  for (unsigned char c : path) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

Dropout::Dropout(float p) : p_(p) {
  MRMF_CHECK_KIND(Usage, p >= 0.f && p <= 1.f, "Dropout: probability ", p, " outside [0, 1]");
}

void Dropout::register_params(ParamStore& store, const std::string& prefix, ParamGroup) {
  store_ = &store;
  if (!id_set_) {
    layer_id_ = dropout_layer_id(prefix);
    id_set_ = true;
  }
}

uint32_t Dropout::layer_id() const { return id_set_ ? layer_id_ : dropout_layer_id(name() + "."); }

Tensor Dropout::forward(Context& ctx, const Tensor& x_in) {
  active_ = false;
  if (!ctx.training() || p_ == 0.f) return x_in;  // identity: no copy, no mask
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  seed_ = ctx.seed();
  stream_id_ = kernels::dropout_stream(ctx.step(), layer_id());
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  kernels::dropout_apply(ctx.stream(), x, y, seed_, stream_id_, p_);
  shape_ = x.shape();
  active_ = true;
  return y;
}

Tensor Dropout::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  if (!need_dx) {
    active_ = false;
    return Tensor();
  }
  if (!active_) return dy_in;  // the forward was the identity
  MRMF_CHECK_KIND(Shape, dy_in.shape() == shape_, "Dropout '", name(), "': gradient ", dy_in.shape().str(),
                  " does not match the forward input ", shape_.str());
  const Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
  Tensor dx = Tensor::empty(dy.shape(), DType::F32, dy.device());
  kernels::dropout_apply(ctx.stream(), dy, dx, seed_, stream_id_, p_);  // same mask, same scale
  active_ = false;
  return dx;
}

}  // namespace mrmf
