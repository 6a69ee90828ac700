// cuBLAS GEMMs of the Linear layer (CUDA builds only; row-major operands).
// cuBLAS is column-major: a row-major [r, c] matrix is its column-major
// transpose with leading dimension c, so each product is written for the
// transposed result (e.g. row-major Y = X W^T is column-major Y^T = W X^T).
// All use beta = 0 (results overwrite) on the context's stream.
#pragma once

#include <cstdint>

#include "layers/context.h"

namespace mrmf::linear_gpu {

// y[N, out] = x[N, in] w[out, in]^T
void forward(Context& ctx, const float* x, const float* w, float* y, int64_t N, int64_t in, int64_t out);
// dw[out, in] = dy[N, out]^T x[N, in]
void backward_weight(Context& ctx, const float* dy, const float* x, float* dw, int64_t N, int64_t in, int64_t out);
// dx[N, in] = dy[N, out] w[out, in]
void backward_input(Context& ctx, const float* dy, const float* w, float* dx, int64_t N, int64_t in, int64_t out);

}  // namespace mrmf::linear_gpu
