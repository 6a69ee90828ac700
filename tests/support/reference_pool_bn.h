// Plain-loop references (double accumulation) for pooling, batch norm,
// dropout scaling and the resolution reducer: the oracles of the custom
// kernels in kernels/{pooling,batchnorm,fused_epilogue,reduce_resolution}.h.
// Written differently from the kernels on purpose: backward passes SCATTER
// (loop over outputs) where the kernels gather (loop over inputs).
// Header-only (inline) so both the unit and the GPU test executables can use
// it without a build-system change.
#pragma once

#include <cmath>
#include <vector>

#include "core/tensor.h"
#include "kernels/pooling_ops.h"

namespace mrmf::ref {

// [N, C, spatial...] seen as P planes of (D, H, W); 1-D = (1, 1, L).
struct Planes {
  int64_t P = 0, D = 1, H = 1, W = 1;
  explicit Planes(const Shape& s) {
    P = s[0] * s[1];
    if (s.ndim() == 3) W = s[2];
    if (s.ndim() == 4) { H = s[2]; W = s[3]; }
    if (s.ndim() == 5) { D = s[2]; H = s[3]; W = s[4]; }
  }
  int64_t plane() const { return D * H * W; }
};

inline std::vector<int64_t> pool_dims3(const std::array<int64_t, 3>& v, int nd, int64_t fill) {
  return nd == 1 ? std::vector<int64_t>{fill, fill, v[0]} : std::vector<int64_t>{v[0], v[1], v[2]};
}

// Max/avg pooling forward; `argmax` (plane offsets) filled for max pooling.
inline Tensor pool_forward(const Tensor& x, bool is_max, const kernels::PoolParams& p, std::vector<int64_t>* argmax = nullptr) {
  const Shape os = kernels::pool_output_shape(x.shape(), p, "ref");
  const Planes in(x.shape()), out(os);
  const auto k = pool_dims3(p.kernel, p.nd, 1), s = pool_dims3(p.stride, p.nd, 1), pad = pool_dims3(p.padding, p.nd, 0);
  const int64_t ind[3] = {in.D, in.H, in.W}, outd[3] = {out.D, out.H, out.W};
  Tensor y = Tensor::empty(os);
  if (argmax) argmax->assign(static_cast<size_t>(os.numel()), -1);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t pl = 0; pl < in.P; ++pl)
    for (int64_t a = 0; a < outd[0]; ++a)
      for (int64_t b = 0; b < outd[1]; ++b)
        for (int64_t c = 0; c < outd[2]; ++c) {
          double best = -INFINITY, sum = 0;
          int64_t arg = -1, count = 0;
          for (int64_t i = 0; i < k[0]; ++i)
            for (int64_t j = 0; j < k[1]; ++j)
              for (int64_t l = 0; l < k[2]; ++l) {
                const int64_t z = a * s[0] - pad[0] + i, h = b * s[1] - pad[1] + j, w = c * s[2] - pad[2] + l;
                if (z < 0 || z >= ind[0] || h < 0 || h >= ind[1] || w < 0 || w >= ind[2]) continue;
                const int64_t off = (z * ind[1] + h) * ind[2] + w;
                const double v = px[pl * in.plane() + off];
                ++count;
                sum += v;
                if (arg < 0 || v > best) { best = v; arg = off; }
              }
          const int64_t o = pl * out.plane() + (a * outd[1] + b) * outd[2] + c;
          const double div = p.count_include_pad ? double(k[0] * k[1] * k[2]) : double(count);
          py[o] = static_cast<float>(is_max ? best : sum / div);
          if (argmax) (*argmax)[static_cast<size_t>(o)] = arg;
        }
  return y;
}

// Pooling backward by scattering each output gradient into its window.
inline Tensor pool_backward(const Tensor& x, const Tensor& dy, bool is_max, const kernels::PoolParams& p) {
  std::vector<int64_t> argmax;
  pool_forward(x, is_max, p, &argmax);
  const Planes in(x.shape()), out(dy.shape());
  const auto k = pool_dims3(p.kernel, p.nd, 1), s = pool_dims3(p.stride, p.nd, 1), pad = pool_dims3(p.padding, p.nd, 0);
  const int64_t ind[3] = {in.D, in.H, in.W}, outd[3] = {out.D, out.H, out.W};
  std::vector<double> acc(static_cast<size_t>(x.numel()), 0.0);
  const float* pdy = dy.data<float>();
  for (int64_t pl = 0; pl < in.P; ++pl)
    for (int64_t a = 0; a < outd[0]; ++a)
      for (int64_t b = 0; b < outd[1]; ++b)
        for (int64_t c = 0; c < outd[2]; ++c) {
          const int64_t o = pl * out.plane() + (a * outd[1] + b) * outd[2] + c;
          if (is_max) {
            acc[static_cast<size_t>(pl * in.plane() + argmax[static_cast<size_t>(o)])] += pdy[o];
            continue;
          }
          std::vector<int64_t> offs;
          for (int64_t i = 0; i < k[0]; ++i)
            for (int64_t j = 0; j < k[1]; ++j)
              for (int64_t l = 0; l < k[2]; ++l) {
                const int64_t z = a * s[0] - pad[0] + i, h = b * s[1] - pad[1] + j, w = c * s[2] - pad[2] + l;
                if (z < 0 || z >= ind[0] || h < 0 || h >= ind[1] || w < 0 || w >= ind[2]) continue;
                offs.push_back((z * ind[1] + h) * ind[2] + w);
              }
          const double div = p.count_include_pad ? double(k[0] * k[1] * k[2]) : double(offs.size());
          for (int64_t off : offs) acc[static_cast<size_t>(pl * in.plane() + off)] += pdy[o] / div;
        }
  Tensor dx = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) dx.data<float>()[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
  return dx;
}

// Batch statistics per channel of [N, C, ...]: mean and biased variance.
inline void bn_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C);
  mean.assign(static_cast<size_t>(C), 0.0);
  var.assign(static_cast<size_t>(C), 0.0);
  const float* px = x.data<float>();
  for (int64_t c = 0; c < C; ++c) {
    double s = 0, s2 = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) s += px[(n * C + c) * inner + k];
    const double m = s / double(N * inner);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) {
        const double d = px[(n * C + c) * inner + k] - m;
        s2 += d * d;
      }
    mean[static_cast<size_t>(c)] = m;
    var[static_cast<size_t>(c)] = s2 / double(N * inner);
  }
}

// y = gamma (x - mean) / sqrt(var + eps) + beta with the given statistics.
inline Tensor bn_apply(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                       const std::vector<double>& gamma, const std::vector<double>& beta, double eps) {
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C);
  Tensor y = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t c = static_cast<size_t>((i / inner) % C);
    y.data<float>()[i] =
        static_cast<float>(gamma[c] * (x.data<float>()[i] - mean[c]) / std::sqrt(var[c] + eps) + beta[c]);
  }
  return y;
}

// Training-mode BN backward in closed form: dgamma, dbeta and dx.
inline Tensor bn_backward(const Tensor& x, const Tensor& dy, const std::vector<double>& gamma, double eps,
                          std::vector<double>& dgamma, std::vector<double>& dbeta) {
  std::vector<double> mean, var;
  bn_stats(x, mean, var);
  const int64_t N = x.size(0), C = x.size(1), inner = x.numel() / (N * C);
  const double M = double(N * inner);
  dgamma.assign(static_cast<size_t>(C), 0.0);
  dbeta.assign(static_cast<size_t>(C), 0.0);
  auto at = [&](int64_t n, int64_t c, int64_t k) { return (n * C + c) * inner + k; };
  for (int64_t c = 0; c < C; ++c) {
    const double is = 1.0 / std::sqrt(var[static_cast<size_t>(c)] + eps);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = at(n, c, k);
        dbeta[static_cast<size_t>(c)] += dy.data<float>()[i];
        dgamma[static_cast<size_t>(c)] += dy.data<float>()[i] * (x.data<float>()[i] - mean[static_cast<size_t>(c)]) * is;
      }
  }
  Tensor dx = Tensor::empty(x.shape());
  for (int64_t c = 0; c < C; ++c) {
    const size_t cc = static_cast<size_t>(c);
    const double is = 1.0 / std::sqrt(var[cc] + eps);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = at(n, c, k);
        const double xhat = (x.data<float>()[i] - mean[cc]) * is;
        dx.data<float>()[i] =
            static_cast<float>(gamma[cc] * is / M * (M * dy.data<float>()[i] - dbeta[cc] - xhat * dgamma[cc]));
      }
  }
  return dx;
}

inline Tensor leaky_relu(const Tensor& x, double slope) {
  Tensor y = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<float>()[i];
    y.data<float>()[i] = static_cast<float>(v > 0 ? v : slope * v);
  }
  return y;
}

// Direct block average of the spatial dims by `factors` (floor), and its adjoint.
inline Tensor reduce_resolution(const Tensor& x, const std::vector<int64_t>& f) {
  const int k = static_cast<int>(f.size());
  std::vector<int64_t> in(3, 1), ff(3, 1), out(3, 1);
  for (int d = 0; d < k; ++d) {
    in[3 - k + d] = x.size(2 + d);
    ff[3 - k + d] = f[static_cast<size_t>(d)];
    out[3 - k + d] = in[3 - k + d] / ff[3 - k + d];
  }
  std::vector<int64_t> os{x.size(0), x.size(1)};
  for (int d = 0; d < k; ++d) os.push_back(out[3 - k + d]);
  Tensor y = Tensor::empty(Shape(os));
  const int64_t P = x.size(0) * x.size(1);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t a = 0; a < out[0]; ++a)
      for (int64_t b = 0; b < out[1]; ++b)
        for (int64_t c = 0; c < out[2]; ++c) {
          double s = 0;
          for (int64_t i = a * ff[0]; i < (a + 1) * ff[0]; ++i)
            for (int64_t j = b * ff[1]; j < (b + 1) * ff[1]; ++j)
              for (int64_t l = c * ff[2]; l < (c + 1) * ff[2]; ++l)
                s += x.data<float>()[p * in[0] * in[1] * in[2] + (i * in[1] + j) * in[2] + l];
          y.data<float>()[p * out[0] * out[1] * out[2] + (a * out[1] + b) * out[2] + c] =
              static_cast<float>(s / double(ff[0] * ff[1] * ff[2]));
        }
  return y;
}

}  // namespace mrmf::ref
