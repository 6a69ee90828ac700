// Row-major single-precision GEMM on the CPU through oneDNN's dnnl_sgemm,
// shared by Linear and the convolutions that reduce to a GEMM.
#pragma once

#include <cstdint>

namespace mrmf {

// C[M, N] = op(A)[M, K] op(B)[K, N] with beta = 0 (C is overwritten);
// ta / tb: 'N' or 'T'. Throws naming the call and oneDNN's status.
void cpu_sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
               int64_t ldb, float* C, int64_t ldc);

}  // namespace mrmf
