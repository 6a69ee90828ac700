// Batch normalization (PyTorch BatchNorm1d / BatchNorm3d semantics).
//   parameters  weight (gamma, 1), bias (beta, 0)                       [C]
//   buffers     running_mean (0), running_var (1)                       [C]
//               num_batches_tracked (0, a 0-dim tensor stored as float)
// Train mode normalizes with the batch statistics (biased variance) and
// updates the running ones with momentum and the unbiased variance; eval mode
// uses the running statistics. CUDA tensors go through cuDNN
// (layers/batchnorm_cudnn.h), CPU tensors through kernels/batchnorm_ops.h.
#pragma once

#include "layers/module.h"

namespace mrmf {

// The parameter/buffer ids of one BN instance (shared with the fused block).
struct BnParamIds {
  ParamId weight = -1, bias = -1, running_mean = -1, running_var = -1, num_batches_tracked = -1;
  void register_in(ParamStore& store, const std::string& prefix, ParamGroup group, int64_t channels);
  // weight = 1, bias = 0, running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void init(ParamStore& store) const;
};

class BatchNorm : public Module {
 public:
  // spatial_dims = 1: [N, F] or [N, C, L] (BatchNorm1d); 3: [N, C, D, H, W] (BatchNorm3d).
  BatchNorm(int64_t num_features, int spatial_dims, double eps = 1e-5, double momentum = 0.1);
  std::string type() const override { return spatial_dims_ == 3 ? "BatchNorm3d" : "BatchNorm1d"; }
  void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) override;
  void init_params(uint64_t seed, InitScheme scheme) override;
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override;
  std::optional<CentreMap> centre_map(int) const override { return CentreMap{}; }

  int64_t num_features() const { return features_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  const BnParamIds& ids() const { return ids_; }

 private:
  void check(const Shape& s) const;
  // cuDNN's BN on the GPU, except for few channels with many values each:
  // its kernels parallelize over channels, so the 4-channel input BN of
  // CosmoFlow at 128^3 took 33 ms a step there against well under 1 ms with
  // mrmf's own kernels (a chunked, deterministic reduction over all SMs).
  bool use_cudnn(const Tensor& t) const { return t.device().is_cuda() && features_ >= 32; }
  int64_t features_;
  int spatial_dims_;
  double eps_, momentum_;
  BnParamIds ids_;
  Tensor x_, save_mean_, save_invstd_;  // kept by a training forward
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNorm(num_features, 1, eps, momentum) {}
};

class BatchNorm3d : public BatchNorm {
 public:
  explicit BatchNorm3d(int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNorm(num_features, 3, eps, momentum) {}
};

}  // namespace mrmf
