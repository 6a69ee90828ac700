// Backend bodies for the optimizer family; see kernels/dispatch.h.
#include "kernels/optim.h"
#include "kernels/optim_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

void sgd_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& buf, const SgdHyper& h) {
  float* b = buf.defined() ? buf.data<float>() : nullptr;
  launch(s.native(), p.numel(), SgdStep{p.data<float>(), g.data<float>(), b, h});
}

void adam_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamHyper& h) {
  launch(s.native(), p.numel(), AdamStep{p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), h});
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
