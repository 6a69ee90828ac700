// Fused optimizer updates over float32 contiguous ranges; dispatch on the stream's device.
// p, g and the state tensors are equally sized views (usually narrow()s of the
// flat buffers of a ParamStore and of the optimizer's state).
#pragma once

#include "kernels/dispatch.h"
#include "kernels/optim.h"

namespace mrmf::kernels {

MRMF_BOTH_BACKENDS(void sgd_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& buf, const SgdHyper& h))
MRMF_BOTH_BACKENDS(void adam_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                                  const AdamHyper& h))

// `buf` may be undefined when h.momentum == 0.
void sgd_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& buf, const SgdHyper& h);
void adam_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamHyper& h);

}  // namespace mrmf::kernels
