// Dropout ops (float32 contiguous); dispatch on the stream's device.
#pragma once

#include "kernels/dispatch.h"

namespace mrmf::kernels {

MRMF_BOTH_BACKENDS(void dropout_apply(Stream& s, const Tensor& x, const Tensor& y, uint64_t seed, uint64_t stream_id,
                                      float p))
MRMF_BOTH_BACKENDS(void dropout_mask(Stream& s, const Tensor& m, uint64_t seed, uint64_t stream_id, float p))

// y = x * mask / (1 - p), mask from (seed, stream_id). Forward and backward
// (x = dy, y = dx, same seed/stream) are the same call. y may alias x.
void dropout_apply(Stream& s, const Tensor& x, const Tensor& y, uint64_t seed, uint64_t stream_id, float p);
// m = mask (1 kept, 0 dropped).
void dropout_mask(Stream& s, const Tensor& m, uint64_t seed, uint64_t stream_id, float p);

}  // namespace mrmf::kernels
