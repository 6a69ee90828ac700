// CPU row loops for "dense" pooling (stride == kernel, no padding: the
// windows tile the input), used by the pooling and fused-epilogue families
// on the CPU backend instead of the one-call-per-element functors.
//
// Why: the per-element functors (kernels/pooling.h) unravel every flat index
// with multiply-high divisions and clip every window; on a GPU that is free,
// on a CPU it made 1-D max pooling run at ~1 GB/s. Here a thread takes whole
// rows (one (plane, d, h) line of outputs, or of inputs for the backward),
// so the coordinates are loop counters, the channel is constant per row
// (per-channel BN loaders hoist their coefficients), and with the window
// width a compile-time constant (2 or 4: CosmoFlow, Neuron Inverter) the
// inner loops unroll and vectorize.
//
// The per-window math is NOT re-implemented: the max scan is
// max_pool_step/max_pool_result, the loaders/post-processors and the
// divisor are the very ones the functors use, and sums run in the same
// order (z, h, w) -- results are bit-identical to the functor path.
//
// Include after kernels/launch_cpu.h; the .inl files call these under
// MRMF_POOL_ROWS (defined only by the CPU translation units).
#pragma once

#include <cmath>
#include <cstring>

#include "kernels/launch_cpu.h"
#include "kernels/pooling.h"

namespace mrmf::kernels::cpu {

// body(r) for r in [0, rows): static OpenMP schedule, serial for small work.
template <class F>
void for_rows(int64_t rows, int64_t work, const F& body) {
  if (work < kSerialBelow) {
    for (int64_t r = 0; r < rows; ++r) body(r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) body(r);
}

// Dispatches on the window width: 2 and 4 (CosmoFlow, Neuron Inverter) as
// compile-time constants so the inner loops unroll; 0 = run-time width.
#define MRMF_WITH_WINDOW_WIDTH(kw, call) \
  do {                                   \
    if ((kw) == 2) {                     \
      constexpr int KW = 2;              \
      call;                              \
    } else if ((kw) == 4) {              \
      constexpr int KW = 4;              \
      call;                              \
    } else {                             \
      constexpr int KW = 0;              \
      call;                              \
    }                                    \
  } while (0)

// Rows are processed in blocks of kBlock outputs. For each input line of a
// window row (z, h), the loader first fills a small buffer (a plain
// element-wise loop: its loop-invariant branches -- BN or not, activation or
// not -- are unswitched and it vectorizes), then the window scan runs over
// the buffer with per-output running state in arrays (vectorized across
// outputs, the window width a constant). The scan order per output is the
// functor's: z, then h, then w.
constexpr int64_t kBlock = 128;

// ---------------------------------------------------------------- forward
// KW: window width along W when known at compile time (0: g.k[2]).
template <int KW, class Load>
void max_pool_rows_forward_w(const Load& load_in, float* y, int32_t* argmax, const PoolGeom& g) {
  const int64_t O0 = g.out[0], O1 = g.out[1], O2 = g.out[2];
  const int64_t I1 = g.in[1], I2 = g.in[2], k0 = g.k[0], k1 = g.k[1];
  const int64_t k2 = KW > 0 ? KW : g.k[2];
  const int64_t rows = g.planes * O0 * O1, in_plane = g.in_plane();
  for_rows(rows, rows * O2 * k0 * k1 * k2, [&](int64_t r) {
    const Load load = load_in;  // private copy: its pointers cannot alias y (see launch_cpu.h)
    const int64_t oh = r % O1, t = r / O1, od = t % O0, plane = t / O0;
    const int64_t c = Load::kNeedsChannel ? plane % g.channels : 0;
    const int64_t base = plane * in_plane;
    float buf[kBlock * (KW > 0 ? KW : 1)], best[kBlock];
    int32_t arg[kBlock];
    int nan_seen[kBlock];
    const int64_t bw = KW > 0 ? kBlock : 1;  // outputs per block (run-time width: one at a time)
    for (int64_t ow0 = 0; ow0 < O2; ow0 += bw) {
      const int64_t nb = ow0 + bw < O2 ? bw : O2 - ow0;
      const int32_t first = static_cast<int32_t>((od * k0 * I1 + oh * k1) * I2 + ow0 * k2);
      for (int64_t o = 0; o < nb; ++o) {
        best[o] = -INFINITY;
        arg[o] = first + static_cast<int32_t>(o * k2);
        nan_seen[o] = 0;
      }
      for (int64_t z = od * k0; z < od * k0 + k0; ++z)
        for (int64_t h = oh * k1; h < oh * k1 + k1; ++h) {
          const int64_t row = (z * I1 + h) * I2 + ow0 * k2;  // plane-relative offset of the block
          if constexpr (KW > 0) {
            for (int64_t w = 0; w < nb * KW; ++w) buf[w] = load(base + row + w, c);
            for (int64_t o = 0; o < nb; ++o)
              for (int64_t j = 0; j < KW; ++j)
                max_pool_step(buf[o * KW + j], static_cast<int32_t>(row + o * KW + j), best[o], arg[o], nan_seen[o]);
          } else {
            for (int64_t j = 0; j < k2; ++j)
              max_pool_step(load(base + row + j, c), static_cast<int32_t>(row + j), best[0], arg[0], nan_seen[0]);
          }
        }
      for (int64_t o = 0; o < nb; ++o) y[r * O2 + ow0 + o] = max_pool_result(best[o], nan_seen[o]);
      if (argmax)
        for (int64_t o = 0; o < nb; ++o) argmax[r * O2 + ow0 + o] = arg[o];
    }
  });
}

template <int KW, class Load>
void avg_pool_rows_forward_w(const Load& load_in, float* y, const PoolGeom& g) {
  const int64_t O0 = g.out[0], O1 = g.out[1], O2 = g.out[2];
  const int64_t I1 = g.in[1], I2 = g.in[2], k0 = g.k[0], k1 = g.k[1];
  const int64_t k2 = KW > 0 ? KW : g.k[2];
  const int64_t rows = g.planes * O0 * O1, in_plane = g.in_plane();
  const int64_t o0[3] = {0, 0, 0};
  const float div = pool_divisor<3>(g, o0);  // every dense window is whole: the same divisor
  for_rows(rows, rows * O2 * k0 * k1 * k2, [&](int64_t r) {
    const Load load = load_in;
    const int64_t oh = r % O1, t = r / O1, od = t % O0, plane = t / O0;
    const int64_t c = Load::kNeedsChannel ? plane % g.channels : 0;
    const int64_t base = plane * in_plane;
    float buf[kBlock * (KW > 0 ? KW : 1)], acc[kBlock];
    const int64_t bw = KW > 0 ? kBlock : 1;
    for (int64_t ow0 = 0; ow0 < O2; ow0 += bw) {
      const int64_t nb = ow0 + bw < O2 ? bw : O2 - ow0;
      for (int64_t o = 0; o < nb; ++o) acc[o] = 0.f;
      for (int64_t z = od * k0; z < od * k0 + k0; ++z)
        for (int64_t h = oh * k1; h < oh * k1 + k1; ++h) {
          const int64_t row = base + (z * I1 + h) * I2 + ow0 * k2;
          if constexpr (KW > 0) {
            for (int64_t w = 0; w < nb * KW; ++w) buf[w] = load(row + w, c);
            for (int64_t o = 0; o < nb; ++o)
              for (int64_t j = 0; j < KW; ++j) acc[o] += buf[o * KW + j];
          } else {
            for (int64_t j = 0; j < k2; ++j) acc[0] += load(row + j, c);
          }
        }
      for (int64_t o = 0; o < nb; ++o) y[r * O2 + ow0 + o] = acc[o] / div;
    }
  });
}

// ---------------------------------------------------------------- backward
// One input row (plane, z, h) at a time; each input element lies in at most
// one window, so the gather is a single term (0.f + term, as the functor's
// accumulation from 0.f rounds) or none (post of 0.f). The terms of a block
// are gathered into a buffer first, then post-processed element-wise.
// Term(orow_offset, ow, local) -> float: the contribution of window ow of
// output row orow to input element `local` (plane-relative offset).
template <int KW, class Post, class Term>
void pool_rows_backward_w(const Post& post_in, float* dx, const PoolGeom& g, const Term& term) {
  const int64_t O0 = g.out[0], O1 = g.out[1], O2 = g.out[2];
  const int64_t I0 = g.in[0], I1 = g.in[1], I2 = g.in[2], k0 = g.k[0], k1 = g.k[1];
  const int64_t k2 = KW > 0 ? KW : g.k[2];
  const int64_t rows = g.planes * I0 * I1;
  for_rows(rows, rows * I2, [&](int64_t r) {
    const Post post = post_in;
    const int64_t h = r % I1, t = r / I1, z = t % I0, plane = t / I0;
    const int64_t c = Post::kNeedsChannel ? plane % g.channels : 0;
    const int64_t base = r * I2;  // flat index of the row's first element
    const int32_t lrow = static_cast<int32_t>((z * I1 + h) * I2);
    float* dxr = dx + base;
    const int64_t oz = z / k0, oh = h / k1;
    int64_t covered = 0;
    if (oz < O0 && oh < O1) {
      const int64_t orow = ((plane * O0 + oz) * O1 + oh) * O2;
      covered = O2 * k2;
      if constexpr (KW > 0) {
        float buf[kBlock * KW];
        for (int64_t ow0 = 0; ow0 < O2; ow0 += kBlock) {
          const int64_t nb = ow0 + kBlock < O2 ? kBlock : O2 - ow0;
          for (int64_t o = 0; o < nb; ++o)
            for (int64_t j = 0; j < KW; ++j)
              buf[o * KW + j] = 0.f + term(orow, ow0 + o, lrow + static_cast<int32_t>((ow0 + o) * KW + j));
          const int64_t w0 = ow0 * KW;
          for (int64_t w = 0; w < nb * KW; ++w) dxr[w0 + w] = post(base + w0 + w, c, buf[w]);
        }
      } else {
        for (int64_t ow = 0; ow < O2; ++ow)
          for (int64_t j = 0; j < k2; ++j) {
            const int64_t w = ow * k2 + j;
            dxr[w] = post(base + w, c, 0.f + term(orow, ow, lrow + static_cast<int32_t>(w)));
          }
      }
    }
    for (int64_t w = covered; w < I2; ++w) dxr[w] = post(base + w, c, 0.f);
  });
}

// ---------------------------------------------------------------- entry points
template <class Load>
void max_pool_rows_forward(const Load& load, float* y, int32_t* argmax, const PoolGeom& g) {
  MRMF_WITH_WINDOW_WIDTH(g.k[2], (max_pool_rows_forward_w<KW>(load, y, argmax, g)));
}

template <class Load>
void avg_pool_rows_forward(const Load& load, float* y, const PoolGeom& g) {
  MRMF_WITH_WINDOW_WIDTH(g.k[2], (avg_pool_rows_forward_w<KW>(load, y, g)));
}

template <class Post>
void max_pool_rows_backward(const Post& post, const float* dy, const int32_t* argmax, float* dx, const PoolGeom& g) {
  auto term = [dy, argmax](int64_t orow, int64_t ow, int32_t local) {
    // argmax == local ? dy : 0.f, as a bit mask: GCC turns the select of a
    // loaded value back into a branch (no vectorization); the mask form is
    // the same value (+0.f when not selected, dy bit for bit otherwise).
    uint32_t bits;
    const float d = dy[orow + ow];
    std::memcpy(&bits, &d, sizeof bits);
    bits &= 0u - static_cast<uint32_t>(argmax[orow + ow] == local);
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  MRMF_WITH_WINDOW_WIDTH(g.k[2], (pool_rows_backward_w<KW>(post, dx, g, term)));
}

template <class Post>
void avg_pool_rows_backward(const Post& post, const float* dy, float* dx, const PoolGeom& g) {
  const int64_t o0[3] = {0, 0, 0};
  const float div = pool_divisor<3>(g, o0);
  auto term = [dy, div](int64_t orow, int64_t ow, int32_t) { return dy[orow + ow] / div; };
  MRMF_WITH_WINDOW_WIDTH(g.k[2], (pool_rows_backward_w<KW>(post, dx, g, term)));
}

}  // namespace mrmf::kernels::cpu
