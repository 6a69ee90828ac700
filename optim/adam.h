// Adam and AdamW with torch.optim semantics (amsgrad = false):
//   Adam:  g += weight_decay * p          (L2 penalty folded into the gradient)
//   AdamW: p *= 1 - lr * weight_decay     (decoupled decay)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// with t the group's 1-based step number.
#pragma once

#include "optim/optimizer.h"

namespace mrmf {

struct AdamOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  bool decoupled = false;  // true: AdamW
};

class Adam : public Optimizer {
 public:
  // State: "exp_avg", "exp_avg_sq".
  explicit Adam(ParamStore& store, AdamOptions opts = {});
  std::string type() const override { return opts_.decoupled ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return opts_; }

 protected:
  void update(Stream& stream, int64_t begin, int64_t end, float lr, int64_t t) override;

 private:
  AdamOptions opts_;
  Tensor m_, v_;
};

// AdamW: Adam with decoupled weight decay; torch's default weight_decay is 1e-2.
class AdamW : public Adam {
 public:
  explicit AdamW(ParamStore& store, AdamOptions opts = defaults());
  static AdamOptions defaults() {
    AdamOptions o;
    o.weight_decay = 1e-2f;
    o.decoupled = true;
    return o;
  }
};

}  // namespace mrmf
