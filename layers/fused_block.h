// BnActPool: optional BatchNorm + activation + optional pooling in one pass
// over the activation (kernels/fused_epilogue.h) -- the CPU hot path of
// conv -> BN -> ReLU -> pool blocks, and of conv -> maxpool -> ReLU
// (ReLU commutes with max pooling). Numerically equal to the unfused
// BatchNorm -> LeakyReLU -> Pool sequence: the same expressions in the same
// order, with BN parameters and buffers under the same state-dict names
// (weight, bias, running_mean, running_var, num_batches_tracked).
// BN statistics use the custom kernels on both backends.
#pragma once

#include "kernels/fused_epilogue_ops.h"
#include "layers/batchnorm.h"
#include "layers/module.h"

namespace mrmf {

struct BnActPoolOptions {
  int64_t bn_channels = 0;  // > 0: batch-normalize this many channels first
  int spatial_dims = 1;     // 1: [N, C, L]; 3: [N, C, D, H, W]
  bool act = true;          // LeakyReLU(slope) (slope 0 = ReLU); false = identity
  float slope = 0.f;
  kernels::PoolKind pool = kernels::PoolKind::None;
  kernels::PoolParams pool_params;  // nd must equal spatial_dims when pooling
  double eps = 1e-5, momentum = 0.1;
};

class BnActPool : public Module {
 public:
  explicit BnActPool(const BnActPoolOptions& opt);
  std::string type() const override { return "BnActPool"; }
  void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) override;
  void init_params(uint64_t seed, InitScheme scheme) override;
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override;
  std::optional<CentreMap> centre_map(int axis) const override;

  const BnActPoolOptions& options() const { return opt_; }
  const BnParamIds& bn_ids() const { return ids_; }

 private:
  std::string who() const { return type() + " '" + name() + "'"; }
  void check(const Shape& s) const;
  kernels::EpilogueSpec spec() const;
  BnActPoolOptions opt_;
  BnParamIds ids_;
  // Kept by a training forward.
  Tensor x_, mean_, invstd_, argmax_;
  bool saved_ = false;
};

}  // namespace mrmf
