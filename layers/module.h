// Modules and autograd-lite.
//
// A Module computes forward(x) -> y, keeping whatever it needs for the
// backward pass, and backward(dy) -> dx, writing the gradients of its
// parameters into the store's flat gradient buffer (overwriting, not
// accumulating: every parameter is used once per forward pass). Sequential
// records the modules it actually ran (a tape) and replays them in reverse.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "layers/context.h"
#include "layers/param_store.h"

namespace mrmf {

enum class InitScheme { PyTorchDefault, GlorotUniform };

// Where a layer's output positions lie in its input along one spatial axis:
// output position i is centred at input coordinate scale * i + offset, with
// input element j centred at j. It lines up the feature maps of one model at
// two resolutions (fusion/resample_top.h), where a border lost to unpadded
// convolutions shifts the positions.
struct CentreMap {
  double scale = 1.0, offset = 0.0;
  // This layer's map followed by the next layer's: the next layer's output
  // position i -> this layer's input coordinate.
  CentreMap then(const CentreMap& next) const { return {scale * next.scale, scale * next.offset + offset}; }
};
// A sliding window (convolution, pooling): output i covers input elements
// stride * i - pad ... + kernel - 1, centred halfway.
inline CentreMap window_centre_map(int64_t kernel, int64_t stride, int64_t pad) {
  return {double(stride), double(kernel - 1) / 2.0 - double(pad)};
}

class Module {
 public:
  virtual ~Module() = default;
  virtual std::string type() const = 0;

  // Registers parameters/buffers as `prefix + "weight"` etc. Called once,
  // before the store is finalized; the module keeps `store` for later access.
  virtual void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) { store_ = &store; }
  // Seeded initialization after finalize. Default: nothing to initialize.
  virtual void init_params(uint64_t seed, InitScheme scheme) {}

  // Output shape for an input shape (including the batch dimension).
  virtual Shape output_shape(const Shape& in) const = 0;
  virtual Tensor forward(Context& ctx, const Tensor& x) = 0;
  // need_dx = false lets the first layer skip computing the input gradient.
  virtual Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) = 0;

  // Releases activations kept for backward (e.g. after an eval pass).
  virtual void clear_saved() {}

  // The map of output positions to input positions along spatial axis
  // `axis` (0 = the first after the channels); nullopt when the layer does
  // not say -- so that a layer nobody taught is refused, not taken for one
  // that keeps the positions. Pointwise layers return the identity.
  virtual std::optional<CentreMap> centre_map(int axis) const { return std::nullopt; }

  const std::string& name() const { return name_; }
  ParamStore* store() const { return store_; }
  void set_name(const std::string& n) { name_ = n; }

 protected:
  ParamStore* store_ = nullptr;
  std::string name_;
};

// Checks that `x` has `ndim` dimensions and `channels` at dim 1; the message
// names the layer and both shapes.
void check_input(const Module& m, const Tensor& x, int ndim, int64_t channels, const char* layout);

class Sequential : public Module {
 public:
  std::string type() const override { return "Sequential"; }
  // Adds a child under `name` ("" = index). Returns a reference to it.
  template <class M>
  M& add(const std::string& name, std::unique_ptr<M> m, ParamGroup group) {
    M& ref = *m;
    add_module(name, std::move(m), group);
    return ref;
  }
  void add_module(const std::string& name, std::unique_ptr<Module> m, ParamGroup group);

  void register_params(ParamStore& store, const std::string& prefix, ParamGroup group) override;
  void init_params(uint64_t seed, InitScheme scheme) override;
  Shape output_shape(const Shape& in) const override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  void clear_saved() override;

  // Called after each child's backward with that child: lets the trainer
  // launch the all-reduce of gradients that are final while backward goes on.
  void set_backward_hook(std::function<void(Module&)> hook) { backward_hook_ = std::move(hook); }

  size_t size() const { return children_.size(); }
  Module& child(size_t i) { return *children_[i].module; }
  ParamGroup child_group(size_t i) const { return children_[i].group; }

 private:
  struct Child {
    std::unique_ptr<Module> module;
    ParamGroup group;
  };
  std::vector<Child> children_;
  std::vector<Module*> tape_;  // modules run by the last forward, in order
  std::function<void(Module&)> backward_hook_;
};

// A model: a network, its parameter store and its input shape (per sample).
class Model {
 public:
  Model(std::string name, Shape sample_shape);
  Sequential& net() { return net_; }
  const std::string& name() const { return name_; }
  const Shape& sample_shape() const { return sample_shape_; }

  // Registers all parameters, allocates the flat buffers on `device` and
  // initializes them from `seed`.
  void build(Device device, uint64_t seed, InitScheme scheme = InitScheme::PyTorchDefault);
  bool built() const { return store_.finalized(); }

  Tensor forward(Context& ctx, const Tensor& x);
  // dloss/doutput -> parameter gradients in params().grads().
  void backward(Context& ctx, const Tensor& dy);

  // Parameters registered by `m` (directly or through children): the
  // element offset of the first one in params().values(), or -1 if none.
  int64_t first_param_offset(const Module& m) const;

  ParamStore& params() { return store_; }
  const ParamStore& params() const { return store_; }
  Shape output_shape(int64_t batch) const;

 private:
  std::string name_;
  Shape sample_shape_;
  Sequential net_;
  ParamStore store_;
  std::unordered_map<const Module*, int64_t> first_offset_;
};

// Seeded initializers (Philox streams keyed by seed and parameter offset, so
// the values are identical on every platform and thread count).
// PyTorch default for Conv/Linear weights: kaiming_uniform(a = sqrt(5)),
// i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void init_uniform(const Tensor& t, float bound, uint64_t seed, uint64_t stream_id);
float pytorch_default_bound(int64_t fan_in);
float glorot_bound(int64_t fan_in, int64_t fan_out);

}  // namespace mrmf
