// Backend bodies for the dropout family; see kernels/dispatch.h.
#include "kernels/dropout.h"
#include "kernels/dropout_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

void dropout_apply(Stream& s, const Tensor& x, const Tensor& y, uint64_t seed, uint64_t stream_id, float p) {
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  const int64_t n = x.numel();
  launch(s.native(), (n + 3) / 4, DropoutApply{x.data<float>(), y.data<float>(), n, seed, stream_id, p, scale});
}

void dropout_mask(Stream& s, const Tensor& m, uint64_t seed, uint64_t stream_id, float p) {
  launch(s.native(), m.numel(), DropoutMask{m.data<float>(), seed, stream_id, p});
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
