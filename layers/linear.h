// Fully connected layer, PyTorch nn.Linear layout: weight [out, in], bias [out].
//   forward   Y = X W^T + b                     X [N, in] -> Y [N, out]
//   backward  dW = dY^T X,  db = sum_n dY,  dX = dY W   (gradients overwrite)
// GEMMs: oneDNN's dnnl_sgemm on the CPU, cuBLAS sgemm on CUDA.
#pragma once

#include "layers/module.h"

namespace mrmf {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string type() const override { return "Linear"; }

  void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) override;
  // PyTorchDefault: weight and bias U(-1/sqrt(in), 1/sqrt(in)).
  // GlorotUniform:  weight U(-sqrt(6/(in+out)), +...), bias zero (Keras defaults).
  void init_params(uint64_t seed, InitScheme scheme) override;

  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  // Returns an undefined tensor when !need_dx.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override { x_ = Tensor(); }

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool has_bias() const { return has_bias_; }
  Tensor weight() const;
  Tensor bias() const;  // undefined without bias

 private:
  void check_x(const Tensor& x) const;

  int64_t in_, out_;
  bool has_bias_;
  ParamId w_id_ = -1, b_id_ = -1;
  Tensor x_;  // input kept for the weight gradient
};

}  // namespace mrmf
