// Plain-loop reference convolution (PyTorch semantics: cross-correlation,
// symmetric zero padding, floor output size) in double: the oracle for the
// oneDNN and cuDNN backends. 1-D and 2-D problems are run as 3-D ones with
// unit extents, so there is exactly one set of loops to trust.
//
// Header-only: tests/CMakeLists.txt lists the support sources explicitly,
// and inline functions let both test executables use this without a new
// source entry.
#pragma once

#include <array>
#include <vector>

#include "core/shape.h"

namespace mrmf::ref {

struct ConvGeom {
  int64_t N = 0, C = 0, O = 0;
  std::array<int64_t, 3> in{}, k{}, s{}, p{}, out{};
  int64_t in_vol() const { return in[0] * in[1] * in[2]; }
  int64_t out_vol() const { return out[0] * out[1] * out[2]; }
  int64_t k_vol() const { return k[0] * k[1] * k[2]; }
};

// x: [N, C, spatial...], w: [O, C, k...]; stride/pad one entry per spatial dim.
inline ConvGeom conv_geom(const Shape& x, const Shape& w, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& pad) {
  ConvGeom g;
  g.N = x[0];
  g.C = x[1];
  g.O = w[0];
  const int sd = x.ndim() - 2, off = 3 - sd;  // spatial dims are right-aligned into 3
  for (int i = 0; i < 3; ++i) {
    const bool real = i >= off;
    g.in[i] = real ? x[2 + i - off] : 1;
    g.k[i] = real ? w[2 + i - off] : 1;
    g.s[i] = real ? stride[i - off] : 1;
    g.p[i] = real ? pad[i - off] : 0;
    g.out[i] = (g.in[i] + 2 * g.p[i] - g.k[i]) / g.s[i] + 1;
  }
  return g;
}

// Calls f(y_index, x_index, w_index) for every multiply of the
// convolution whose input position lies inside the (unpadded) input.
template <class F>
void conv_for_each(const ConvGeom& g, F&& f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t yi = ((n * g.O + o) * g.out[0] + od) * g.out[1] * g.out[2] + oh * g.out[2] + ow;
            for (int64_t c = 0; c < g.C; ++c)
              for (int64_t kd = 0; kd < g.k[0]; ++kd) {
                const int64_t id = od * g.s[0] - g.p[0] + kd;
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                  const int64_t ih = oh * g.s[1] - g.p[1] + kh;
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                    const int64_t iw = ow * g.s[2] - g.p[2] + kw;
                    if (iw < 0 || iw >= g.in[2]) continue;
                    const int64_t xi = ((n * g.C + c) * g.in[0] + id) * g.in[1] * g.in[2] + ih * g.in[2] + iw;
                    const int64_t wi = ((o * g.C + c) * g.k[0] + kd) * g.k[1] * g.k[2] + kh * g.k[2] + kw;
                    f(yi, xi, wi);
                  }
                }
              }
          }
}

// y = conv(x, w) + b (b empty: no bias).
inline std::vector<double> conv_forward(const ConvGeom& g, const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& b) {
  std::vector<double> y(static_cast<size_t>(g.N * g.O * g.out_vol()), 0.0);
  if (!b.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] = b[(i / static_cast<size_t>(g.out_vol())) % static_cast<size_t>(g.O)];
  conv_for_each(g, [&](int64_t yi, int64_t xi, int64_t wi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

// dx = d(sum dy * y)/dx
inline std::vector<double> conv_backward_data(const ConvGeom& g, const std::vector<double>& dy,
                                              const std::vector<double>& w) {
  std::vector<double> dx(static_cast<size_t>(g.N * g.C * g.in_vol()), 0.0);
  conv_for_each(g, [&](int64_t yi, int64_t xi, int64_t wi) { dx[xi] += dy[yi] * w[wi]; });
  return dx;
}

// dw (and db = per-channel sum of dy) of sum dy * y.
inline void conv_backward_weights(const ConvGeom& g, const std::vector<double>& x, const std::vector<double>& dy,
                                  std::vector<double>& dw, std::vector<double>& db) {
  dw.assign(static_cast<size_t>(g.O * g.C * g.k_vol()), 0.0);
  db.assign(static_cast<size_t>(g.O), 0.0);
  conv_for_each(g, [&](int64_t yi, int64_t xi, int64_t wi) { dw[wi] += dy[yi] * x[xi]; });
  for (size_t i = 0; i < dy.size(); ++i) db[(i / static_cast<size_t>(g.out_vol())) % static_cast<size_t>(g.O)] += dy[i];
}

}  // namespace mrmf::ref
