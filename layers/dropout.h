// Inverted dropout: in training, y = x * mask / (1 - p); identity in eval mode.
// The mask is a Philox function of (ctx.seed(), ctx.step(), layer id), so the
// CPU and the GPU drop the same elements and backward recomputes the mask
// instead of storing it. The layer never advances the step (the trainer does).
// The layer id defaults to a hash of the layer's full state-dict path (given
// at register_params), so two dropout layers never share a mask and the id is
// the same in every process that builds the same model.
#pragma once

#include "layers/module.h"

namespace mrmf {

class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f);
  std::string type() const override { return "Dropout"; }
  void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) override;
  Shape output_shape(const Shape& in) const override { return in; }
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override { active_ = false; }
  std::optional<CentreMap> centre_map(int) const override { return CentreMap{}; }

  float p() const { return p_; }
  uint32_t layer_id() const;
  void set_layer_id(uint32_t id) {
    layer_id_ = id;
    id_set_ = true;
  }

 private:
  float p_;
  uint32_t layer_id_ = 0;
  bool id_set_ = false;
  // Mask identity of the last training forward (backward reuses it).
  bool active_ = false;
  uint64_t seed_ = 0, stream_id_ = 0;
  Shape shape_;
};

// FNV-1a, 32 bits: the default dropout layer id of a state-dict path.
uint32_t dropout_layer_id(const std::string& path);

}  // namespace mrmf
