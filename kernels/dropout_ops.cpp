// CPU instantiation of the dropout family, plus the public checked entry
// points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/dropout_ops.inl"

namespace mrmf::kernels {

void dropout_apply(Stream& s, const Tensor& x, const Tensor& y, uint64_t seed, uint64_t stream_id, float p) {
  check_devices("dropout_apply", s, {&x, &y});
  check_f32_contiguous("dropout_apply", {&x, &y});
  MRMF_CHECK_KIND(Shape, x.numel() == y.numel(), "dropout_apply: ", x.str(), " vs ", y.str());
  MRMF_CHECK_KIND(Usage, p >= 0.f && p <= 1.f, "dropout_apply: probability ", p, " outside [0, 1]");
  MRMF_DISPATCH(s, dropout_apply(s, x, y, seed, stream_id, p));
}

void dropout_mask(Stream& s, const Tensor& m, uint64_t seed, uint64_t stream_id, float p) {
  check_devices("dropout_mask", s, {&m});
  check_f32_contiguous("dropout_mask", {&m});
  MRMF_CHECK_KIND(Usage, p >= 0.f && p <= 1.f, "dropout_mask: probability ", p, " outside [0, 1]");
  MRMF_DISPATCH(s, dropout_mask(s, m, seed, stream_id, p));
}

}  // namespace mrmf::kernels
