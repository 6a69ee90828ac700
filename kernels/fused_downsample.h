// The fused pooling-downsample kernel for raw scientific data: in ONE pass over
// the stored samples it
//   1. converts the stored element type (uint16, int16, float16 bits, float32) to float32,
//   2. applies an optional per-element transform (log1p, or per-channel x * scale + shift),
//   3. averages non-overlapping f0 x f1 x f2 blocks along the spatial axes (channels never),
//   4. changes the layout to channels-first [N, C, s0', s1', s2'] (input channels-last
//      [N, s..., C], or channels-first [N, C, s...] -- which is also how the Neuron
//      Inverter `x.view(-1, C, T)` quirk is expressed: the (N, T, C) memory read as (N, C, T)),
//   5. and can write several resolution levels at once (1/1 + 1/2 + 1/8 of a cube, ...).
//
// Multi-level design (why): one functor call owns one output position of the
// COARSEST level (block B = per-axis max of the levels' factors, every level's
// factor must divide B) for all channels, and writes every level's outputs
// that lie inside that block, each averaged directly from the input (not from
// a finer level, so each level equals a direct average bit-for-bit). The
// block's input is fetched from memory once; the finer levels re-read it from
// L1 / registers. So the input crosses the memory bus once whatever the
// number of levels, and each output element is written once.
//
// Granularity: a call handles `chunk` consecutive coarse positions along the
// last spatial axis. The CPU backend uses whole rows (index arithmetic paid
// once per row; contiguous streams), the GPU one position per thread
// (neighbouring threads touch neighbouring addresses -> coalesced).
// Spatial dims are right-aligned in 3 slots: (N, T, C) -> in = (1, 1, T).
#pragma once

#include <cmath>

#include "kernels/fastdiv.h"
#include "kernels/hd.h"

namespace mrmf::kernels {

constexpr int kFusedMaxLevels = 4;
constexpr int kFusedMaxChannels = 8;

enum class RawType : int { U16 = 0, I16 = 1, F16 = 2, F32 = 3 };
enum class FusedTransform : int { None = 0, Log1p = 1, Scale = 2 };

// IEEE binary16 bits -> float32, exact (subnormals, inf, nan), host and device.
MRMF_HD MRMF_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
  }
  union {
    uint32_t u;
    float f;
  } cv{bits};
  return cv.f;
}

template <RawType R>
struct RawLoad;
template <>
struct RawLoad<RawType::U16> {
  using T = uint16_t;
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return static_cast<float>(p[i]); }
};
template <>
struct RawLoad<RawType::I16> {
  using T = int16_t;
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return static_cast<float>(p[i]); }
};
template <>
struct RawLoad<RawType::F16> {
  using T = uint16_t;
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return half_bits_to_float(p[i]); }
};
template <>
struct RawLoad<RawType::F32> {
  using T = float;
  MRMF_HD MRMF_INLINE static float get(const T* p, int64_t i) { return p[i]; }
};

struct FusedGeom {
  int64_t n = 0, c = 0;
  int64_t in[3] = {1, 1, 1};
  int64_t s_n = 0, s_c = 0, s[3] = {0, 0, 0};  // input strides (elements)
  int64_t block[3] = {1, 1, 1};                // coarsest factors B
  int64_t nblk[3] = {1, 1, 1};                 // in / B
  int64_t chunk = 1, nchunk = 1;               // coarse positions per call along slot 2
  int levels = 0;
  int64_t f[kFusedMaxLevels][3] = {};
  int64_t out[kFusedMaxLevels][3] = {};
  float inv[kFusedMaxLevels] = {};
  FusedTransform transform = FusedTransform::None;
  float scale[kFusedMaxChannels] = {}, shift[kFusedMaxChannels] = {};
  FastDiv chunk_div, nblk1_div, nblk0_div;  // set by finalize() (host)

  void finalize() {
    nchunk = (nblk[2] + chunk - 1) / chunk;
    chunk_div = FastDiv(nchunk);
    nblk1_div = FastDiv(nblk[1]);
    nblk0_div = FastDiv(nblk[0]);
  }
  int64_t calls() const { return n * nblk[0] * nblk[1] * nchunk; }
};

struct FusedOutputs {
  float* y[kFusedMaxLevels] = {};
};

// R: stored type; TF: the transform (compile-time, so the CPU loops have no
// per-element branch). g.transform must equal TF.
template <RawType R, FusedTransform TF>
struct FusedDownsample {
  using T = typename RawLoad<R>::T;
  const T* x;
  FusedOutputs o;
  FusedGeom g;

  MRMF_HD MRMF_INLINE float value(int64_t idx, int64_t c) const {
    const float v = RawLoad<R>::get(x, idx);
    if (TF == FusedTransform::Log1p) return log1pf(v);
    if (TF == FusedTransform::Scale) return v * g.scale[c] + g.shift[c];
    return v;
  }

  MRMF_HD void operator()(int64_t i) const {
    const int64_t j2 = i - g.chunk_div(i) * g.nchunk;
    int64_t q = g.chunk_div(i);
    const int64_t p1 = q - g.nblk1_div(q) * g.nblk[1];
    q = g.nblk1_div(q);
    const int64_t p0 = q - g.nblk0_div(q) * g.nblk[0];
    const int64_t n = g.nblk0_div(q);
    const int64_t p2_begin = j2 * g.chunk;
    const int64_t p2_end = min_of(p2_begin + g.chunk, g.nblk[2]);
    const int64_t xn = n * g.s_n;
    for (int l = 0; l < g.levels; ++l) {
      const int64_t f0 = g.f[l][0], f1 = g.f[l][1], f2 = g.f[l][2];
      const int64_t r0 = g.block[0] / f0, r1 = g.block[1] / f1, r2 = g.block[2] / f2;
      const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2];
      const float inv = g.inv[l];
      float* const yl = o.y[l];
      for (int64_t u0 = 0; u0 < r0; ++u0)
        for (int64_t u1 = 0; u1 < r1; ++u1) {
          const int64_t o0 = p0 * r0 + u0, o1 = p1 * r1 + u1;
          const int64_t x01 = xn + o0 * f0 * g.s[0] + o1 * f1 * g.s[1];
          for (int64_t c = 0; c < g.c; ++c) {
            float* const yrow = yl + (((n * g.c + c) * O0 + o0) * O1 + o1) * O2;
            const int64_t xc = x01 + c * g.s_c;
            // o2 runs over the chunk's outputs of this level: contiguous writes.
            for (int64_t o2 = p2_begin * r2; o2 < p2_end * r2; ++o2) {
              float acc = 0.f;
              for (int64_t a = 0; a < f0; ++a)
                for (int64_t b = 0; b < f1; ++b) {
                  const int64_t row = xc + a * g.s[0] + b * g.s[1] + o2 * f2 * g.s[2];
                  for (int64_t z = 0; z < f2; ++z) acc += value(row + z * g.s[2], c);
                }
              yrow[o2] = acc * inv;
            }
          }
        }
    }
  }

#if !defined(__CUDA_ARCH__)
  // The CPU traversal of the same math (host only, g.chunk = whole rows):
  // per output row, the block's input rows are streamed once each into a
  // small channels-interleaved accumulator (contiguous loads, no per-element
  // index arithmetic), then written channels-first. Each output is summed in
  // the same (a, b, z) order as operator(), so both give identical bits.
  template <int kC>
  void accumulate_last(float* acc, int64_t row, int64_t wn, int64_t f2) const {
    const int64_t C = kC > 0 ? kC : g.c;
    if (f2 == 1) {
      for (int64_t k = 0; k < wn * C; ++k) acc[k] += value(row + k, kC > 0 ? k % kC : k % C);
      return;
    }
    for (int64_t w = 0; w < wn; ++w)
      for (int64_t z = 0; z < f2; ++z) {
        const int64_t src = row + (w * f2 + z) * C;
        for (int64_t c = 0; c < C; ++c) acc[w * C + c] += value(src + c, c);
      }
  }

  void row_cpu(int64_t i) const {
    constexpr int64_t kAcc = 2048;
    int64_t q = i;  // j2 == 0: one call per (n, p0, p1)
    const int64_t p1 = q - g.nblk1_div(q) * g.nblk[1];
    q = g.nblk1_div(q);
    const int64_t p0 = q - g.nblk0_div(q) * g.nblk[0];
    const int64_t n = g.nblk0_div(q);
    const int64_t C = g.c;
    const bool last = g.s_c == 1 && C > 1;
    float acc[kAcc];
    for (int l = 0; l < g.levels; ++l) {
      const int64_t f0 = g.f[l][0], f1 = g.f[l][1], f2 = g.f[l][2];
      const int64_t r0 = g.block[0] / f0, r1 = g.block[1] / f1;
      const int64_t O0 = g.out[l][0], O1 = g.out[l][1], O2 = g.out[l][2];
      const float inv = g.inv[l];
      for (int64_t u0 = 0; u0 < r0; ++u0)
        for (int64_t u1 = 0; u1 < r1; ++u1) {
          const int64_t o0 = p0 * r0 + u0, o1 = p1 * r1 + u1;
          const int64_t x01 = n * g.s_n + o0 * f0 * g.s[0] + o1 * f1 * g.s[1];
          float* const y0 = o.y[l] + ((n * C * O0 + o0) * O1 + o1) * O2;  // channel 0's row
          const int64_t ystride = O0 * O1 * O2;
          if (last) {  // channels-last rows: [w][c] interleaved
            const int64_t seg = kAcc / C;
            for (int64_t w0 = 0; w0 < O2; w0 += seg) {
              const int64_t wn = w0 + seg < O2 ? seg : O2 - w0;
              for (int64_t k = 0; k < wn * C; ++k) acc[k] = 0.f;
              for (int64_t a = 0; a < f0; ++a)
                for (int64_t b = 0; b < f1; ++b) {
                  const int64_t row = x01 + a * g.s[0] + b * g.s[1] + w0 * f2 * C;
                  // Compile-time channel counts of the real data (3: NI, 4: CosmoFlow) vectorise.
                  if (C == 4)
                    accumulate_last<4>(acc, row, wn, f2);
                  else if (C == 3)
                    accumulate_last<3>(acc, row, wn, f2);
                  else
                    accumulate_last<0>(acc, row, wn, f2);
                }
              for (int64_t c = 0; c < C; ++c) {
                float* yr = y0 + c * ystride + w0;
                for (int64_t w = 0; w < wn; ++w) yr[w] = acc[w * C + c] * inv;
              }
            }
          } else {  // channels-first rows (or one channel): contiguous per channel
            for (int64_t c = 0; c < C; ++c)
              for (int64_t w0 = 0; w0 < O2; w0 += kAcc) {
                const int64_t wn = w0 + kAcc < O2 ? kAcc : O2 - w0;
                for (int64_t k = 0; k < wn; ++k) acc[k] = 0.f;
                for (int64_t a = 0; a < f0; ++a)
                  for (int64_t b = 0; b < f1; ++b) {
                    const int64_t row = x01 + c * g.s_c + a * g.s[0] + b * g.s[1] + w0 * f2 * g.s[2];
                    if (f2 == 1) {
                      for (int64_t w = 0; w < wn; ++w) acc[w] += value(row + w * g.s[2], c);
                    } else {
                      for (int64_t w = 0; w < wn; ++w)
                        for (int64_t z = 0; z < f2; ++z) acc[w] += value(row + (w * f2 + z) * g.s[2], c);
                    }
                  }
                float* yr = y0 + c * ystride + w0;
                for (int64_t w = 0; w < wn; ++w) yr[w] = acc[w] * inv;
              }
          }
        }
    }
  }
#endif
};

}  // namespace mrmf::kernels
