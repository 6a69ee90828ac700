// CPU instantiation of the pooling family, plus the public checked entry
// points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/pooling_rows_cpu.h"
#define MRMF_POOL_ROWS 1
#include "kernels/pooling_ops.inl"

#include <sstream>

namespace mrmf::kernels {

PoolParams PoolParams::make_1d(int64_t k, int64_t s, int64_t p, bool include_pad) {
  PoolParams r;
  r.nd = 1;
  r.kernel = {k, 1, 1};
  r.stride = {s > 0 ? s : k, 1, 1};  // stride 0 = kernel size (PyTorch's stride=None)
  r.padding = {p, 0, 0};
  r.count_include_pad = include_pad;
  return r;
}

PoolParams PoolParams::make_3d(std::array<int64_t, 3> k, std::array<int64_t, 3> s, std::array<int64_t, 3> p,
                               bool include_pad) {
  PoolParams r;
  r.nd = 3;
  r.kernel = k;
  for (int d = 0; d < 3; ++d) r.stride[d] = s[d] > 0 ? s[d] : k[d];
  r.padding = p;
  r.count_include_pad = include_pad;
  return r;
}

std::string PoolParams::str() const {
  std::ostringstream os;
  auto put = [&](const char* name, const std::array<int64_t, 3>& v) {
    os << name << "=";
    if (nd == 1) {
      os << v[0];
    } else {
      os << "(" << v[0] << "," << v[1] << "," << v[2] << ")";
    }
  };
  put("k", kernel);
  os << " ";
  put("s", stride);
  os << " ";
  put("p", padding);
  return os.str();
}

PoolGeom make_pool_geom(const Shape& in, const PoolParams& p, const std::string& who) {
  MRMF_CHECK_KIND(Shape, p.nd == 1 || p.nd == 3, who, ": pooling supports 1 or 3 spatial dims, got ", p.nd);
  MRMF_CHECK_KIND(Shape, in.ndim() == 2 + p.nd, who, ": expected input ", p.nd == 1 ? "[N, C, L]" : "[N, C, D, H, W]",
                  ", got ", in.str());
  static const char* kNames1[] = {"length"};
  static const char* kNames3[] = {"depth", "height", "width"};
  PoolGeom g;
  g.planes = in[0] * in[1];
  g.channels = in[1];
  g.count_include_pad = p.count_include_pad;
  const int first = 3 - p.nd;  // geometry slot of spatial dim 0
  for (int d = 0; d < p.nd; ++d) {
    const char* dim = p.nd == 1 ? kNames1[d] : kNames3[d];
    const int64_t L = in[2 + d], k = p.kernel[d], s = p.stride[d], pad = p.padding[d];
    MRMF_CHECK_KIND(Shape, k >= 1 && s >= 1 && pad >= 0, who, ": invalid pooling ", p.str());
    MRMF_CHECK_KIND(Shape, 2 * pad <= k, who, ": padding ", pad, " exceeds half the kernel ", k, " (", p.str(), ")");
    if (pad == 0) {
      MRMF_CHECK_KIND(Shape, L >= k, who, ": input ", dim, " ", L, " < kernel ", k, " (input ", in.str(), ")");
    } else {
      MRMF_CHECK_KIND(Shape, L + 2 * pad >= k, who, ": input ", dim, " ", L, " + 2*padding ", pad, " < kernel ", k,
                      " (input ", in.str(), ")");
    }
    g.in[first + d] = L;
    g.k[first + d] = k;
    g.s[first + d] = s;
    g.p[first + d] = pad;
    g.out[first + d] = (L + 2 * pad - k) / s + 1;
  }
  MRMF_CHECK_KIND(Shape, g.in_plane() < (int64_t(1) << 31), who, ": spatial size of ", in.str(),
                  " exceeds the int32 argmax range");
  g.finalize();
  return g;
}

Shape pool_output_shape(const Shape& in, const PoolParams& p, const std::string& who) {
  const PoolGeom g = make_pool_geom(in, p, who);
  if (p.nd == 1) return Shape{in[0], in[1], g.out[2]};
  return Shape{in[0], in[1], g.out[0], g.out[1], g.out[2]};
}

namespace {
void check_pair(const char* op, const Tensor& big, const Tensor& small, const PoolParams& p) {
  const Shape want = pool_output_shape(big.shape(), p, op);
  MRMF_CHECK_KIND(Shape, small.shape() == want, op, ": pooled tensor ", small.shape().str(), " does not match ",
                  want.str(), " expected for input ", big.shape().str(), " with ", p.str());
}
void check_argmax(const char* op, const Tensor& argmax, const Tensor& y) {
  if (!argmax.defined()) return;
  MRMF_CHECK_KIND(Shape, argmax.dtype() == DType::I32 && argmax.is_contiguous() && argmax.shape() == y.shape(), op,
                  ": argmax must be a contiguous int32 tensor of shape ", y.shape().str(), ", got ", argmax.str());
}
}  // namespace

void max_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const Tensor& argmax, const PoolParams& p) {
  check_devices("max_pool_forward", s, {&x, &y, &argmax});
  check_f32_contiguous("max_pool_forward", {&x, &y});
  check_pair("max_pool_forward", x, y, p);
  check_argmax("max_pool_forward", argmax, y);
  MRMF_DISPATCH(s, max_pool_forward(s, x, y, argmax, make_pool_geom(x.shape(), p, "max_pool_forward")));
}

void max_pool_backward(Stream& s, const Tensor& dy, const Tensor& argmax, const Tensor& dx, const PoolParams& p) {
  check_devices("max_pool_backward", s, {&dy, &argmax, &dx});
  check_f32_contiguous("max_pool_backward", {&dy, &dx});
  check_pair("max_pool_backward", dx, dy, p);
  MRMF_CHECK_KIND(Shape, argmax.defined(), "max_pool_backward: argmax is required");
  check_argmax("max_pool_backward", argmax, dy);
  MRMF_DISPATCH(s, max_pool_backward(s, dy, argmax, dx, make_pool_geom(dx.shape(), p, "max_pool_backward")));
}

void avg_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const PoolParams& p) {
  check_devices("avg_pool_forward", s, {&x, &y});
  check_f32_contiguous("avg_pool_forward", {&x, &y});
  check_pair("avg_pool_forward", x, y, p);
  MRMF_DISPATCH(s, avg_pool_forward(s, x, y, make_pool_geom(x.shape(), p, "avg_pool_forward")));
}

void avg_pool_backward(Stream& s, const Tensor& dy, const Tensor& dx, const PoolParams& p) {
  check_devices("avg_pool_backward", s, {&dy, &dx});
  check_f32_contiguous("avg_pool_backward", {&dy, &dx});
  check_pair("avg_pool_backward", dx, dy, p);
  MRMF_DISPATCH(s, avg_pool_backward(s, dy, dx, make_pool_geom(dx.shape(), p, "avg_pool_backward")));
}

}  // namespace mrmf::kernels
