#include <climits>

#include "core/check_cuda.h"
#include "layers/gpu_handles.h"
#include "layers/linear_cublas.h"

namespace mrmf::linear_gpu {

namespace {
int as_int(int64_t v, const char* what) {
  MRMF_CHECK_KIND(Shape, v >= 0 && v <= INT_MAX, "Linear: ", what, " = ", v, " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}
}  // namespace

void forward(Context& ctx, const float* x, const float* w, float* y, int64_t N, int64_t in, int64_t out) {
  const float one = 1.f, zero = 0.f;
  // Column-major: Y^T [out, N] = W [out, in] (stored as W^T, ld in: op T) * X^T [in, N] (ld in).
  MRMF_CUBLAS_CHECK(cublasSgemm(ctx.gpu().cublas, CUBLAS_OP_T, CUBLAS_OP_N, as_int(out, "out"), as_int(N, "N"),
                                as_int(in, "in"), &one, w, as_int(in, "in"), x, as_int(in, "in"), &zero, y,
                                as_int(out, "out")));
}

void backward_weight(Context& ctx, const float* dy, const float* x, float* dw, int64_t N, int64_t in, int64_t out) {
  const float one = 1.f, zero = 0.f;
  // Column-major: dW^T [in, out] = X^T [in, N] (ld in) * dY [N, out] (stored as dY^T, ld out: op T).
  MRMF_CUBLAS_CHECK(cublasSgemm(ctx.gpu().cublas, CUBLAS_OP_N, CUBLAS_OP_T, as_int(in, "in"), as_int(out, "out"),
                                as_int(N, "N"), &one, x, as_int(in, "in"), dy, as_int(out, "out"), &zero, dw,
                                as_int(in, "in")));
}

void backward_input(Context& ctx, const float* dy, const float* w, float* dx, int64_t N, int64_t in, int64_t out) {
  const float one = 1.f, zero = 0.f;
  // Column-major: dX^T [in, N] = W^T [in, out] (ld in) * dY^T [out, N] (ld out).
  MRMF_CUBLAS_CHECK(cublasSgemm(ctx.gpu().cublas, CUBLAS_OP_N, CUBLAS_OP_N, as_int(in, "in"), as_int(N, "N"),
                                as_int(out, "out"), &one, w, as_int(in, "in"), dy, as_int(out, "out"), &zero, dx,
                                as_int(in, "in")));
}

}  // namespace mrmf::linear_gpu
