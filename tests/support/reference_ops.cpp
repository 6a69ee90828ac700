#include "support/reference_ops.h"

namespace mrmf::ref {

std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                           int64_t N, int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(N * out));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.empty() ? 0.0 : b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i) acc += x[static_cast<size_t>(n * in + i)] * w[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(n * out + o)] = acc;
    }
  return y;
}

std::vector<double> to_vec(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor from_vec(const std::vector<double>& v, const Shape& s) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  return t;
}

}  // namespace mrmf::ref
