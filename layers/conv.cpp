#include "layers/conv.h"

#include "layers/conv_onednn.h"
#ifdef MRMF_HAVE_CUDA
#include "layers/conv_cudnn.h"
#endif

namespace mrmf {

namespace {
std::string layout_of(int dims) { return dims == 1 ? "[N, C, L]" : dims == 2 ? "[N, C, H, W]" : "[N, C, D, H, W]"; }

std::string vec_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}
}  // namespace

Shape ConvSpec::weight_shape() const {
  std::vector<int64_t> d{out_channels, in_channels};
  d.insert(d.end(), kernel.begin(), kernel.end());
  return Shape(d);
}

Shape ConvSpec::output_shape_unchecked(const Shape& x) const {
  std::vector<int64_t> d{x[0], out_channels};
  for (int i = 0; i < dims; ++i) d.push_back((x[2 + i] + 2 * pad[i] - kernel[i]) / stride[i] + 1);
  return Shape(d);
}

int64_t ConvSpec::kernel_volume() const {
  int64_t v = 1;
  for (int64_t k : kernel) v *= k;
  return v;
}

int64_t same_padding(int64_t kernel) {
  MRMF_CHECK_KIND(Shape, kernel >= 1 && kernel % 2 == 1,
                  "padding 'same' needs an odd kernel size (symmetric "
                  "padding), got ",
                  kernel);
  return (kernel - 1) / 2;
}

Conv::Conv(int dims, int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel,
           std::vector<int64_t> stride, std::vector<int64_t> pad, bool bias)
    : cpu_(std::make_unique<onednn_conv::Primitives>()) {
  spec_.dims = dims;
  spec_.in_channels = in_channels;
  spec_.out_channels = out_channels;
  spec_.kernel = std::move(kernel);
  spec_.stride = std::move(stride);
  spec_.pad = std::move(pad);
  spec_.bias = bias;
  const auto n = static_cast<size_t>(dims);
  MRMF_CHECK_KIND(Shape, dims >= 1 && dims <= 3, "convolution: ", dims, " spatial dimensions (1 to 3 supported)");
  MRMF_CHECK_KIND(Shape, spec_.kernel.size() == n && spec_.stride.size() == n && spec_.pad.size() == n, type(),
                  ": kernel ", vec_str(spec_.kernel), ", stride ", vec_str(spec_.stride), " and padding ",
                  vec_str(spec_.pad), " need ", dims, " entries each");
  MRMF_CHECK_KIND(Shape, in_channels > 0 && out_channels > 0, type(),
                  ": channels must be positive, got in = ", in_channels, ", out = ", out_channels);
  for (size_t i = 0; i < n; ++i)
    MRMF_CHECK_KIND(Shape, spec_.kernel[i] > 0 && spec_.stride[i] > 0 && spec_.pad[i] >= 0, type(), ": kernel ",
                    vec_str(spec_.kernel), " and stride ", vec_str(spec_.stride), " must be positive, padding ",
                    vec_str(spec_.pad), " non-negative");
}

Conv::~Conv() = default;

void Conv::register_params(ParamStore& store, const std::string& prefix, ParamGroup group) {
  store_ = &store;
  w_id_ = store.add_param(prefix + "weight", spec_.weight_shape(), group);
  if (spec_.bias) b_id_ = store.add_param(prefix + "bias", Shape{spec_.out_channels}, group);
}

void Conv::init_params(uint64_t seed, InitScheme scheme) {
  MRMF_CHECK(store_ && w_id_ >= 0, type(), " '", name(), "': init_params before register_params");
  const int64_t fan_in = spec_.in_channels * spec_.kernel_volume();
  const int64_t fan_out = spec_.out_channels * spec_.kernel_volume();
  const float wb = scheme == InitScheme::GlorotUniform ? glorot_bound(fan_in, fan_out) : pytorch_default_bound(fan_in);
  // Stream ids from the store offsets: distinct per tensor, stable across runs.
  init_uniform(weight(), wb, seed, static_cast<uint64_t>(store_->info(w_id_).offset));
  if (spec_.bias) {
    // Keras' Glorot scheme zero-initializes biases; PyTorch draws them from U(+-1/sqrt(fan_in)).
    const float bb = scheme == InitScheme::GlorotUniform ? 0.f : pytorch_default_bound(fan_in);
    init_uniform(bias(), bb, seed, static_cast<uint64_t>(store_->info(b_id_).offset));
  }
}

Tensor Conv::weight() const {
  MRMF_CHECK(store_ && w_id_ >= 0, type(), " '", name(), "': parameters not registered");
  return store_->value(w_id_);
}

Tensor Conv::bias() const { return spec_.bias && store_ ? store_->value(b_id_) : Tensor(); }

size_t Conv::cpu_primitive_builds() const { return cpu_->builds(); }
std::string Conv::cpu_impl_info() const { return cpu_->impl_info(); }

std::optional<CentreMap> Conv::centre_map(int axis) const {
  if (axis < 0 || axis >= spec_.dims) return std::nullopt;
  return window_centre_map(spec_.kernel[axis], spec_.stride[axis], spec_.pad[axis]);
}

Shape Conv::output_shape(const Shape& in) const {
  const int nd = spec_.dims + 2;
  MRMF_CHECK_KIND(Shape, in.ndim() == nd && in[1] == spec_.in_channels, type(), " '", name(), "': expected input ",
                  layout_of(spec_.dims), " with C = ", spec_.in_channels, ", got ", in.str());
  const Shape out = spec_.output_shape_unchecked(in);
  for (int i = 0; i < spec_.dims; ++i)
    MRMF_CHECK_KIND(Shape, in[2 + i] + 2 * spec_.pad[i] >= spec_.kernel[i], type(), " '", name(), "': input ", in.str(),
                    " with padding ", vec_str(spec_.pad), " is smaller than the kernel ", vec_str(spec_.kernel),
                    " (output size < 1)");
  return out;
}

Tensor Conv::forward(Context& ctx, const Tensor& x_in) {
  const Shape ys = output_shape(x_in.shape());
  MRMF_CHECK_KIND(Shape, x_in.dtype() == DType::F32, type(), " '", name(), "': expected float32 input, got ",
                  x_in.str());
  MRMF_CHECK_KIND(Device, x_in.device() == ctx.device() && weight().device() == ctx.device(), type(), " '", name(),
                  "': input ", x_in.str(), ", parameters on ", weight().device().str(), ", context on ",
                  ctx.device().str());
  Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous(ctx.stream());
  Tensor y = Tensor::empty(ys, DType::F32, x.device());
  if (x.device().is_cpu()) {
    cpu_->forward(spec_, x, weight(), bias(), y);
  } else {
#ifdef MRMF_HAVE_CUDA
    if (!gpu_) gpu_ = std::make_unique<cudnn_conv::Plans>();
    gpu_->forward(ctx, spec_, x, weight(), bias(), y);
#else
    MRMF_THROW(Device, type(), " '", name(), "': input on ", x.device().str(), " but mrmf was built without CUDA");
#endif
  }
  if (ctx.training()) x_ = x;
  return y;
}

Tensor Conv::backward(Context& ctx, const Tensor& dy_in, bool need_dx) {
  MRMF_CHECK(x_.defined(), type(), " '", name(), "': backward without a training-mode forward");
  const Shape ys = spec_.output_shape_unchecked(x_.shape());
  MRMF_CHECK_KIND(Shape, dy_in.shape() == ys, type(), " '", name(), "': gradient ", dy_in.shape().str(),
                  " does not match the output ", ys.str(), " of the forward input ", x_.shape().str());
  MRMF_CHECK_KIND(Device, dy_in.device() == x_.device(), type(), " '", name(), "': gradient ", dy_in.str(),
                  " on a different device than the forward input ", x_.str());
  Tensor dy = dy_in.is_contiguous() ? dy_in : dy_in.contiguous(ctx.stream());
  Tensor dx = need_dx ? Tensor::empty(x_.shape(), DType::F32, x_.device()) : Tensor();
  Tensor dw = store_->grad(w_id_);
  Tensor db = spec_.bias ? store_->grad(b_id_) : Tensor();
  if (x_.device().is_cpu()) {
    cpu_->backward(spec_, x_, dy, weight(), dx, dw, db);
  } else {
#ifdef MRMF_HAVE_CUDA
    if (!gpu_) gpu_ = std::make_unique<cudnn_conv::Plans>();
    gpu_->backward(ctx, spec_, x_, dy, weight(), dx, dw, db);
#else
    MRMF_THROW(Device, type(), " '", name(), "': gradient on ", dy.device().str(), " but mrmf was built without CUDA");
#endif
  }
  x_ = Tensor();
  return dx;
}

}  // namespace mrmf
