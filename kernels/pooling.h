// Max / average pooling functors, 1-D ([N, C, L]) and 3-D ([N, C, D, H, W]).
//
// Geometry is always stored as 3 spatial dims (a 1-D input is D = H = 1,
// W = L); the ND template parameter lets the compiler drop the unused loops.
// Output size is floor((in + 2p - k) / s) + 1, as in PyTorch (ceil_mode=False).
//
// Forward: one call per OUTPUT element. Max pooling records the argmax as the
// int32 offset inside the input plane (d * H * W + h * W + w).
// Backward: one call per INPUT element that gathers the contributions of all
// windows containing it in a fixed order -- deterministic, no atomics.
//
// The value loader (Load) and the gradient post-processor (Post) are template
// parameters so the fused BN + activation + pool epilogue (fused_epilogue.h)
// reuses these exact loops: plain pooling is the fused epilogue with the
// identity transform.
#pragma once

#include <cmath>

#include "kernels/fastdiv.h"
#include "kernels/hd.h"

namespace mrmf::kernels {

struct PoolGeom {
  int64_t planes = 0;    // N * C
  int64_t channels = 1;  // C (for per-channel loaders)
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1};
  int64_t p[3] = {0, 0, 0};
  bool count_include_pad = true;  // average pooling divisor: k^n (true) or the valid count
  // Multiply-high dividers for the extents above (set by finalize(), host side).
  FastDiv in_div[3], out_div[3], s_div[3], ch_div;
  void finalize() {
    for (int d = 0; d < 3; ++d) {
      in_div[d] = FastDiv(in[d]);
      out_div[d] = FastDiv(out[d]);
      s_div[d] = FastDiv(s[d]);
    }
    ch_div = FastDiv(channels);
  }
  MRMF_HD int64_t channel_of(int64_t plane) const { return plane - ch_div(plane) * channels; }
  MRMF_HD int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  MRMF_HD int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

// A geometry whose D and H are trivial runs the 1-D instantiation (fewer divisions).
MRMF_HD MRMF_INLINE bool pool_is_1d(const PoolGeom& g) {
  return g.in[0] == 1 && g.in[1] == 1 && g.k[0] == 1 && g.k[1] == 1 && g.out[0] == 1 && g.out[1] == 1;
}

// Splits a flat index over [planes, e0, e1, e2] into plane and coordinates.
template <int ND>
MRMF_HD MRMF_INLINE void pool_unravel(const int64_t* ext, const FastDiv* div, int64_t i, int64_t& plane, int64_t* c) {
  if constexpr (ND == 1) {
    plane = div[2](i);
    c[0] = 0;
    c[1] = 0;
    c[2] = i - plane * ext[2];
  } else {
    const int64_t t = div[2](i);
    c[2] = i - t * ext[2];
    const int64_t u = div[1](t);
    c[1] = t - u * ext[1];
    plane = div[0](u);
    c[0] = u - plane * ext[0];
  }
}

// The window of output `o` along dim d, clipped to the input: [lo, hi).
template <int ND>
MRMF_HD MRMF_INLINE void pool_window(const PoolGeom& g, const int64_t* o, int64_t* lo, int64_t* hi) {
  for (int d = (ND == 1 ? 2 : 0); d < 3; ++d) {
    const int64_t start = o[d] * g.s[d] - g.p[d];
    lo[d] = max_of<int64_t>(start, 0);
    hi[d] = min_of<int64_t>(start + g.k[d], g.in[d]);
  }
  if constexpr (ND == 1) {
    lo[0] = lo[1] = 0;
    hi[0] = hi[1] = 1;
  }
}

// The outputs whose windows contain input coordinate x along each dim: [lo, hi).
template <int ND>
MRMF_HD MRMF_INLINE void pool_covering(const PoolGeom& g, const int64_t* x, int64_t* lo, int64_t* hi) {
  for (int d = (ND == 1 ? 2 : 0); d < 3; ++d) {
    // o * s - p <= x < o * s - p + k   <=>   (x + p - k + 1) / s <= o <= (x + p) / s
    const int64_t t = x[d] + g.p[d] - g.k[d] + 1;
    lo[d] = t <= 0 ? 0 : g.s_div[d](t + g.s[d] - 1);
    hi[d] = min_of<int64_t>(g.s_div[d](x[d] + g.p[d]) + 1, g.out[d]);
  }
  if constexpr (ND == 1) {
    lo[0] = lo[1] = 0;
    hi[0] = hi[1] = 1;
  }
}

// Average-pooling divisor of the window of output o.
template <int ND>
MRMF_HD MRMF_INLINE float pool_divisor(const PoolGeom& g, const int64_t* o) {
  // In floor mode every window lies inside [-p, in + p), so counting padding gives k^n.
  if (g.count_include_pad) return static_cast<float>(g.k[0] * g.k[1] * g.k[2]);
  int64_t lo[3], hi[3];
  pool_window<ND>(g, o, lo, hi);
  return static_cast<float>((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
}

// One step of the max-pool scan over a window, shared by the per-element
// functors below and the CPU row loops (kernels/pooling_rows_cpu.h), so the
// semantics are written once. PyTorch semantics: the first maximum wins; a
// NaN wins and sticks (its last occurrence is the argmax). Written with
// integer flags and a max-select so the compiler emits cmov/maxss (and
// vector blends) instead of a branch that real data makes unpredictable.
// (Index type I: int64_t in the functors, int32_t in the CPU row loops so
// that the flag, the index and the value have the same vector lane width.)
template <class I>
MRMF_HD MRMF_INLINE void max_pool_step(float v, I pos, float& best, I& arg, int& nan_seen) {
  const int is_nan = v != v;
  const int take = is_nan | ((v > best) & !nan_seen);
  arg = take ? pos : arg;
  best = v > best ? v : best;
  nan_seen |= is_nan;
}
MRMF_HD MRMF_INLINE float max_pool_result(float best, int nan_seen) { return nan_seen ? NAN : best; }

// Stride == kernel and no padding in every dim: windows tile the input, each
// input element lies in at most one window (the CPU row loops' fast case).
MRMF_HD MRMF_INLINE bool pool_is_dense(const PoolGeom& g) {
  for (int d = 0; d < 3; ++d)
    if (g.s[d] != g.k[d] || g.p[d] != 0) return false;
  return true;
}

// ---- loaders / post-processors for plain pooling ----
struct LoadPlain {
  static constexpr bool kNeedsChannel = false;
  const float* x;
  MRMF_HD float operator()(int64_t idx, int64_t /*c*/) const { return x[idx]; }
};
struct PostPlain {
  static constexpr bool kNeedsChannel = false;
  MRMF_HD float operator()(int64_t /*idx*/, int64_t /*c*/, float g) const { return g; }
};

template <int ND, class Load>
struct MaxPoolForwardT {
  Load load;
  float* y;
  int32_t* argmax;
  PoolGeom g;
  MRMF_HD void operator()(int64_t i) const {
    int64_t plane, o[3], lo[3], hi[3];
    pool_unravel<ND>(g.out, g.out_div, i, plane, o);
    int64_t c = 0;
    if constexpr (Load::kNeedsChannel) c = g.channel_of(plane);
    pool_window<ND>(g, o, lo, hi);
    const int64_t base = plane * g.in_plane();
    float best = -INFINITY;
    int64_t arg = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];
    int nan_seen = 0;
    for (int64_t z = lo[0]; z < hi[0]; ++z)
      for (int64_t h = lo[1]; h < hi[1]; ++h) {
        const int64_t row = (z * g.in[1] + h) * g.in[2];
        for (int64_t w = lo[2]; w < hi[2]; ++w) max_pool_step(load(base + row + w, c), row + w, best, arg, nan_seen);
      }
    y[i] = max_pool_result(best, nan_seen);
    if (argmax) argmax[i] = static_cast<int32_t>(arg);
  }
};

template <int ND, class Load>
struct AvgPoolForwardT {
  Load load;
  float* y;
  PoolGeom g;
  MRMF_HD void operator()(int64_t i) const {
    int64_t plane, o[3], lo[3], hi[3];
    pool_unravel<ND>(g.out, g.out_div, i, plane, o);
    int64_t c = 0;
    if constexpr (Load::kNeedsChannel) c = g.channel_of(plane);
    pool_window<ND>(g, o, lo, hi);
    const int64_t base = plane * g.in_plane();
    float acc = 0.f;
    for (int64_t z = lo[0]; z < hi[0]; ++z)
      for (int64_t h = lo[1]; h < hi[1]; ++h) {
        const int64_t row = base + (z * g.in[1] + h) * g.in[2];
        for (int64_t w = lo[2]; w < hi[2]; ++w) acc += load(row + w, c);
      }
    y[i] = acc / pool_divisor<ND>(g, o);
  }
};

// dx[i] = post(sum over windows whose argmax is i of dy[window])
template <int ND, class Post>
struct MaxPoolBackwardT {
  Post post;
  const float* dy;
  const int32_t* argmax;
  float* dx;
  PoolGeom g;
  MRMF_HD void operator()(int64_t i) const {
    int64_t plane, x[3], lo[3], hi[3];
    pool_unravel<ND>(g.in, g.in_div, i, plane, x);
    int64_t c = 0;
    if constexpr (Post::kNeedsChannel) c = g.channel_of(plane);
    pool_covering<ND>(g, x, lo, hi);
    const int32_t local = static_cast<int32_t>((x[0] * g.in[1] + x[1]) * g.in[2] + x[2]);
    const int64_t base = plane * g.out_plane();
    float acc = 0.f;
    for (int64_t z = lo[0]; z < hi[0]; ++z)
      for (int64_t h = lo[1]; h < hi[1]; ++h) {
        const int64_t row = base + (z * g.out[1] + h) * g.out[2];
        for (int64_t w = lo[2]; w < hi[2]; ++w) acc += argmax[row + w] == local ? dy[row + w] : 0.f;
      }
    dx[i] = post(i, c, acc);
  }
};

// dx[i] = post(sum over windows containing i of dy[window] / divisor[window])
template <int ND, class Post>
struct AvgPoolBackwardT {
  Post post;
  const float* dy;
  float* dx;
  PoolGeom g;
  MRMF_HD void operator()(int64_t i) const {
    int64_t plane, x[3], lo[3], hi[3];
    pool_unravel<ND>(g.in, g.in_div, i, plane, x);
    int64_t c = 0;
    if constexpr (Post::kNeedsChannel) c = g.channel_of(plane);
    pool_covering<ND>(g, x, lo, hi);
    const int64_t base = plane * g.out_plane();
    float acc = 0.f;
    for (int64_t z = lo[0]; z < hi[0]; ++z)
      for (int64_t h = lo[1]; h < hi[1]; ++h) {
        const int64_t row = base + (z * g.out[1] + h) * g.out[2];
        for (int64_t w = lo[2]; w < hi[2]; ++w) {
          const int64_t o[3] = {z, h, w};
          acc += dy[row + w] / pool_divisor<ND>(g, o);
        }
      }
    dx[i] = post(i, c, acc);
  }
};

template <int ND>
using MaxPoolForward = MaxPoolForwardT<ND, LoadPlain>;
template <int ND>
using AvgPoolForward = AvgPoolForwardT<ND, LoadPlain>;
template <int ND>
using MaxPoolBackward = MaxPoolBackwardT<ND, PostPlain>;
template <int ND>
using AvgPoolBackward = AvgPoolBackwardT<ND, PostPlain>;

}  // namespace mrmf::kernels
