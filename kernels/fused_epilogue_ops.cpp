// CPU instantiation of the fused epilogue family, plus the public checked
// entry points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/pooling_rows_cpu.h"
#define MRMF_POOL_ROWS 1
#include "kernels/fused_epilogue_ops.inl"

namespace mrmf::kernels {
namespace {
EpilogueGeom resolve(const Shape& in, const EpilogueSpec& spec, const std::string& who) {
  MRMF_CHECK_KIND(Shape, in.ndim() >= 2 && in[0] > 0 && in[1] > 0, who, ": expected [N, C, ...], got ", in.str());
  EpilogueGeom e;
  e.act = spec.act;
  e.slope = spec.slope;
  e.pool = spec.pool;
  if (spec.pool != PoolKind::None) {
    e.g = make_pool_geom(in, spec.pool_params, who);
  } else {
    e.g.planes = in[0] * in[1];
    e.g.channels = in[1];
    e.g.in[2] = in.numel() / (in[0] * in[1]);  // inner extent, for the element-wise functors
    e.g.finalize();
  }
  return e;
}

void check_bn(const char* op, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
              const Tensor& beta) {
  const bool any = mean.defined() || invstd.defined() || gamma.defined() || beta.defined();
  if (!any) return;
  for (const Tensor* t : {&mean, &invstd, &gamma, &beta})
    MRMF_CHECK_KIND(Shape, t->defined() && t->numel() == x.size(1), op,
                    ": BN tensors must all be [C] = [", x.size(1), "], got ", t->str());
}
}  // namespace

Shape fused_epilogue_output_shape(const Shape& in, const EpilogueSpec& spec, const std::string& who) {
  if (spec.pool == PoolKind::None) {
    MRMF_CHECK_KIND(Shape, in.ndim() >= 2, who, ": expected [N, C, ...], got ", in.str());
    return in;
  }
  return pool_output_shape(in, spec.pool_params, who);
}

void fused_epilogue_forward(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                            const Tensor& beta, const Tensor& y, const Tensor& argmax, const EpilogueSpec& spec) {
  const char* op = "fused_epilogue_forward";
  check_devices(op, s, {&x, &mean, &invstd, &gamma, &beta, &y, &argmax});
  check_f32_contiguous(op, {&x, &mean, &invstd, &gamma, &beta, &y});
  check_bn(op, x, mean, invstd, gamma, beta);
  const EpilogueGeom e = resolve(x.shape(), spec, op);
  const Shape want = fused_epilogue_output_shape(x.shape(), spec, op);
  MRMF_CHECK_KIND(Shape, y.shape() == want, op, ": output ", y.shape().str(), ", expected ", want.str());
  if (argmax.defined())
    MRMF_CHECK_KIND(Shape, argmax.dtype() == DType::I32 && argmax.shape() == want && argmax.is_contiguous(), op,
                    ": argmax must be contiguous int32 ", want.str(), ", got ", argmax.str());
  MRMF_DISPATCH(s, fused_epilogue_forward(s, x, mean, invstd, gamma, beta, y, argmax, e));
}

void fused_epilogue_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& argmax, const Tensor& mean,
                             const Tensor& invstd, const Tensor& gamma, const Tensor& beta, const Tensor& dz,
                             const EpilogueSpec& spec) {
  const char* op = "fused_epilogue_backward";
  check_devices(op, s, {&x, &dy, &argmax, &mean, &invstd, &gamma, &beta, &dz});
  check_f32_contiguous(op, {&x, &dy, &mean, &invstd, &gamma, &beta, &dz});
  check_bn(op, x, mean, invstd, gamma, beta);
  const EpilogueGeom e = resolve(x.shape(), spec, op);
  const Shape want = fused_epilogue_output_shape(x.shape(), spec, op);
  MRMF_CHECK_KIND(Shape, dy.shape() == want && dz.numel() == x.numel(), op, ": input ", x.shape().str(),
                  ", output gradient ", dy.shape().str(), " (expected ", want.str(), "), input gradient ", dz.str());
  if (spec.pool == PoolKind::Max)
    MRMF_CHECK_KIND(Shape, argmax.defined() && argmax.dtype() == DType::I32 && argmax.shape() == want, op,
                    ": max pooling backward needs the int32 argmax ", want.str(), " of the forward pass, got ",
                    argmax.str());
  MRMF_DISPATCH(s, fused_epilogue_backward(s, x, dy, argmax, mean, invstd, gamma, beta, dz, e));
}

}  // namespace mrmf::kernels
