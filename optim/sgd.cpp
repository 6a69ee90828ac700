#include "optim/sgd.h"

#include "kernels/optim_ops.h"

namespace mrmf {

SGD::SGD(ParamStore& store, SgdOptions opts) : Optimizer(store), opts_(opts) {
  MRMF_CHECK_KIND(Config, opts.momentum >= 0.f, "SGD: momentum must be >= 0, got ", opts.momentum);
  MRMF_CHECK_KIND(Config, opts.weight_decay >= 0.f, "SGD: weight_decay must be >= 0, got ", opts.weight_decay);
  MRMF_CHECK_KIND(Config, !opts.nesterov || (opts.momentum > 0.f && opts.dampening == 0.f),
                  "SGD: Nesterov momentum requires momentum > 0 and zero dampening (got momentum ", opts.momentum,
                  ", dampening ", opts.dampening, ")");
  if (opts.momentum != 0.f) buf_ = add_state("momentum_buffer");
}

void SGD::update(Stream& stream, int64_t begin, int64_t end, float lr, int64_t t) {
  kernels::SgdHyper h;
  h.lr = lr;
  h.momentum = opts_.momentum;
  h.dampening = opts_.dampening;
  h.weight_decay = opts_.weight_decay;
  h.nesterov = opts_.nesterov;
  h.first_step = t == 1;
  const int64_t n = end - begin;
  kernels::sgd_step(stream, store().values().narrow(0, begin, n), store().grads().narrow(0, begin, n),
                    buf_.defined() ? buf_.narrow(0, begin, n) : Tensor(), h);
}

}  // namespace mrmf
