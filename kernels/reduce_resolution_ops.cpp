// CPU instantiation of the resolution reducer, plus the public checked entry
// points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/reduce_resolution_ops.inl"

namespace mrmf::kernels {

ReduceGeom make_reduce_geom(const Shape& in, const std::vector<int64_t>& factors, const std::string& who) {
  const int k = static_cast<int>(factors.size());
  MRMF_CHECK_KIND(Shape, k >= 1 && k <= 3, who, ": 1 to 3 spatial factors expected, got ", k);
  MRMF_CHECK_KIND(Shape, in.ndim() == 2 + k, who, ": ", k, " factor(s) need an input [N, C, ", k, " spatial dim(s)], got ",
                  in.str());
  ReduceGeom g;
  g.planes = in[0] * in[1];
  for (int d = 0; d < k; ++d) {
    const int slot = 3 - k + d;
    const int64_t L = in[2 + d], f = factors[static_cast<size_t>(d)];
    MRMF_CHECK_KIND(Shape, f >= 1, who, ": factor ", f, " for spatial axis ", d, " must be >= 1");
    MRMF_CHECK_KIND(Shape, L >= f, who, ": spatial axis ", d, " of input ", in.str(), " has size ", L, " < factor ", f);
    g.in[slot] = L;
    g.f[slot] = f;
    g.out[slot] = L / f;
  }
  g.finalize();
  return g;
}

Shape reduce_resolution_shape(const Shape& in, const std::vector<int64_t>& factors, const std::string& who) {
  const ReduceGeom g = make_reduce_geom(in, factors, who);
  std::vector<int64_t> d{in[0], in[1]};
  for (int slot = 3 - static_cast<int>(factors.size()); slot < 3; ++slot) d.push_back(g.out[slot]);
  return Shape(d);
}

void reduce_resolution_forward(Stream& s, const Tensor& x, const Tensor& y, const std::vector<int64_t>& factors) {
  const char* op = "reduce_resolution_forward";
  check_devices(op, s, {&x, &y});
  check_f32_contiguous(op, {&x, &y});
  const Shape want = reduce_resolution_shape(x.shape(), factors, op);
  MRMF_CHECK_KIND(Shape, y.shape() == want, op, ": output ", y.shape().str(), ", expected ", want.str());
  MRMF_DISPATCH(s, reduce_resolution_forward(s, x, y, make_reduce_geom(x.shape(), factors, op)));
}

void reduce_resolution_backward(Stream& s, const Tensor& dy, const Tensor& dx, const std::vector<int64_t>& factors) {
  const char* op = "reduce_resolution_backward";
  check_devices(op, s, {&dy, &dx});
  check_f32_contiguous(op, {&dy, &dx});
  const Shape want = reduce_resolution_shape(dx.shape(), factors, op);
  MRMF_CHECK_KIND(Shape, dy.shape() == want, op, ": output gradient ", dy.shape().str(), ", expected ", want.str());
  MRMF_DISPATCH(s, reduce_resolution_backward(s, dy, dx, make_reduce_geom(dx.shape(), factors, op)));
}

}  // namespace mrmf::kernels
