// Inverted dropout with a counter-based mask: element i is kept when
// philox_uniform(seed, stream_id, i) >= p and then scaled by 1 / (1 - p).
// The mask is a pure function of (seed, stream_id, i) -- identical on the
// CPU and the GPU and for any thread count -- so backward recomputes it
// instead of storing it. stream_id = dropout_stream(step, layer_id).
#pragma once

#include "kernels/philox.h"

namespace mrmf::kernels {

// Upper 32 bits: the layer id; lower 32 bits: the training step. Two layers
// (or two steps) never share a stream unless their 32-bit ids collide.
MRMF_HD MRMF_INLINE uint64_t dropout_stream(uint64_t step, uint32_t layer_id) {
  return (static_cast<uint64_t>(layer_id) << 32) | (step & 0xffffffffull);
}

// The four uniforms of counter block b: lane l equals philox_uniform(seed, stream_id, 4 b + l).
// One Philox evaluation serves four elements (philox_uniform would redo it per element).
MRMF_HD MRMF_INLINE Philox4x32 dropout_block(uint64_t seed, uint64_t stream_id, uint64_t b) {
  return philox4x32_10(static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), static_cast<uint32_t>(stream_id),
                       static_cast<uint32_t>(stream_id >> 32), static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
}

// y = keep(i) ? x * scale : 0 for the 4 elements of block b (launch over
// ceil(n / 4) blocks); also backward with x = dy, y = dx.
struct DropoutApply {
  const float* x;
  float* y;
  int64_t n;
  uint64_t seed;
  uint64_t stream_id;
  float p;      // drop probability
  float scale;  // 1 / (1 - p), 0 when p == 1
  MRMF_HD void operator()(int64_t b) const {
    const Philox4x32 r = dropout_block(seed, stream_id, static_cast<uint64_t>(b));
    const int64_t i0 = 4 * b;
    for (int l = 0; l < 4; ++l) {
      const int64_t i = i0 + l;
      if (i < n) y[i] = uint_to_unit_float(r.v[l]) >= p ? x[i] * scale : 0.f;
    }
  }
};

// The mask itself as 0 / 1 floats (tests, debugging).
struct DropoutMask {
  float* m;
  uint64_t seed;
  uint64_t stream_id;
  float p;
  MRMF_HD void operator()(int64_t i) const {
    m[i] = philox_uniform(seed, stream_id, static_cast<uint64_t>(i)) >= p ? 1.f : 0.f;
  }
};

}  // namespace mrmf::kernels
