// Stochastic gradient descent with torch.optim.SGD semantics:
//   d = g + weight_decay * p
//   momentum != 0:  buf = d at a group's first step, else momentum * buf + (1 - dampening) * d
//                   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
#pragma once

#include "optim/optimizer.h"

namespace mrmf {

struct SgdOptions {
  float momentum = 0.f;
  float dampening = 0.f;
  float weight_decay = 0.f;
  bool nesterov = false;  // requires momentum > 0 and dampening == 0 (as torch)
};

class SGD : public Optimizer {
 public:
  // State: "momentum_buffer" (only when momentum != 0).
  explicit SGD(ParamStore& store, SgdOptions opts = {});
  std::string type() const override { return "SGD"; }
  const SgdOptions& options() const { return opts_; }

 protected:
  void update(Stream& stream, int64_t begin, int64_t end, float lr, int64_t t) override;

 private:
  SgdOptions opts_;
  Tensor buf_;
};

}  // namespace mrmf
