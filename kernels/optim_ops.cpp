// CPU instantiation of the optimizer family, plus the public checked entry points.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/optim_ops.inl"

namespace mrmf::kernels {
namespace {
void same_numel(const char* op, const Tensor& a, const Tensor& b) {
  MRMF_CHECK_KIND(Shape, a.numel() == b.numel(), op, ": ", a.str(), " and ", b.str(), " differ in size");
}
}  // namespace

void sgd_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& buf, const SgdHyper& h) {
  check_devices("sgd_step", s, {&p, &g, &buf});
  check_f32_contiguous("sgd_step", {&p, &g, &buf});
  same_numel("sgd_step", p, g);
  MRMF_CHECK(h.momentum == 0.f || buf.defined(), "sgd_step: momentum ", h.momentum, " needs a momentum buffer");
  if (buf.defined()) same_numel("sgd_step", p, buf);
  MRMF_DISPATCH(s, sgd_step(s, p, g, buf, h));
}

void adam_step(Stream& s, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamHyper& h) {
  check_devices("adam_step", s, {&p, &g, &m, &v});
  check_f32_contiguous("adam_step", {&p, &g, &m, &v});
  same_numel("adam_step", p, g);
  same_numel("adam_step", p, m);
  same_numel("adam_step", p, v);
  MRMF_DISPATCH(s, adam_step(s, p, g, m, v, h));
}

}  // namespace mrmf::kernels
