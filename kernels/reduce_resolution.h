// The resolution reducer: averages non-overlapping f0 x f1 x f2 blocks of the
// spatial dims of [N, C, spatial...] (channels are never averaged). A factor
// of 1 leaves that axis alone, so "factor 2 along time only" or "along z only"
// are the same functor. Spatial dims are held in 3 slots, right-aligned
// ([N, C, L] -> (1, 1, L)); out = floor(in / f): a trailing remainder that
// does not fill a block is dropped (and gets zero gradient).
#pragma once

#include "kernels/fastdiv.h"
#include "kernels/hd.h"

namespace mrmf::kernels {

struct ReduceGeom {
  int64_t planes = 0;  // N * C
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t f[3] = {1, 1, 1};
  FastDiv in_div[3], out_div[3], f_div[3];  // set by finalize() (host)
  void finalize() {
    for (int d = 0; d < 3; ++d) {
      in_div[d] = FastDiv(in[d]);
      out_div[d] = FastDiv(out[d]);
      f_div[d] = FastDiv(f[d]);
    }
  }
  MRMF_HD int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  MRMF_HD int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  MRMF_HD float inv_block() const { return 1.f / static_cast<float>(f[0] * f[1] * f[2]); }
};

MRMF_HD MRMF_INLINE void reduce_unravel(const int64_t* ext, const FastDiv* div, int64_t i, int64_t& plane,
                                        int64_t* c) {
  const int64_t t = div[2](i);
  c[2] = i - t * ext[2];
  const int64_t u = div[1](t);
  c[1] = t - u * ext[1];
  plane = div[0](u);
  c[0] = u - plane * ext[0];
}

// One call per output element: y = mean of its block.
struct ReduceResolutionForward {
  const float* x;
  float* y;
  ReduceGeom g;
  MRMF_HD void operator()(int64_t i) const {
    int64_t plane, o[3];
    reduce_unravel(g.out, g.out_div, i, plane, o);
    const float* base = x + plane * g.in_plane();
    float acc = 0.f;
    for (int64_t a = 0; a < g.f[0]; ++a)
      for (int64_t b = 0; b < g.f[1]; ++b) {
        const float* row = base + ((o[0] * g.f[0] + a) * g.in[1] + o[1] * g.f[1] + b) * g.in[2] + o[2] * g.f[2];
        for (int64_t c = 0; c < g.f[2]; ++c) acc += row[c];
      }
    y[i] = acc * g.inv_block();
  }
};

// One call per input element: dx = dy[block] / (f0 f1 f2), 0 in a dropped remainder.
struct ReduceResolutionBackward {
  const float* dy;
  float* dx;
  ReduceGeom g;
  MRMF_HD void operator()(int64_t i) const {
    int64_t plane, xc[3];
    reduce_unravel(g.in, g.in_div, i, plane, xc);
    const int64_t o0 = g.f_div[0](xc[0]), o1 = g.f_div[1](xc[1]), o2 = g.f_div[2](xc[2]);
    if (o0 >= g.out[0] || o1 >= g.out[1] || o2 >= g.out[2]) {
      dx[i] = 0.f;
      return;
    }
    dx[i] = dy[plane * g.out_plane() + (o0 * g.out[1] + o1) * g.out[2] + o2] * g.inv_block();
  }
};

}  // namespace mrmf::kernels
