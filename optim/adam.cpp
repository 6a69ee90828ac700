#include "optim/adam.h"

#include <cmath>

#include "kernels/optim_ops.h"

namespace mrmf {

Adam::Adam(ParamStore& store, AdamOptions opts) : Optimizer(store), opts_(opts) {
  const char* name = opts.decoupled ? "AdamW" : "Adam";
  MRMF_CHECK_KIND(Config, opts.beta1 >= 0.f && opts.beta1 < 1.f, name, ": beta1 must be in [0, 1), got ", opts.beta1);
  MRMF_CHECK_KIND(Config, opts.beta2 >= 0.f && opts.beta2 < 1.f, name, ": beta2 must be in [0, 1), got ", opts.beta2);
  MRMF_CHECK_KIND(Config, opts.eps >= 0.f, name, ": eps must be >= 0, got ", opts.eps);
  MRMF_CHECK_KIND(Config, opts.weight_decay >= 0.f, name, ": weight_decay must be >= 0, got ", opts.weight_decay);
  m_ = add_state("exp_avg");
  v_ = add_state("exp_avg_sq");
}

void Adam::update(Stream& stream, int64_t begin, int64_t end, float lr, int64_t t) {
  // Bias corrections in double on the host: beta2^t for t ~ 1e5 needs it.
  const double bc1 = 1.0 - std::pow(static_cast<double>(opts_.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(opts_.beta2), static_cast<double>(t));
  kernels::AdamHyper h;
  h.lr = lr;
  h.beta1 = opts_.beta1;
  h.beta2 = opts_.beta2;
  h.eps = opts_.eps;
  h.weight_decay = opts_.weight_decay;
  h.decoupled = opts_.decoupled;
  h.step_size = static_cast<float>(lr / bc1);
  h.bias2_sqrt = static_cast<float>(std::sqrt(bc2));
  const int64_t n = end - begin;
  kernels::adam_step(stream, store().values().narrow(0, begin, n), store().grads().narrow(0, begin, n),
                     m_.narrow(0, begin, n), v_.narrow(0, begin, n), h);
}

AdamW::AdamW(ParamStore& store, AdamOptions opts) : Adam(store, [&] {
  opts.decoupled = true;
  return opts;
}()) {}

}  // namespace mrmf
