#include "layers/cpu_sgemm.h"

#include <dnnl.h>

#include "core/error.h"

namespace mrmf {

void cpu_sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
               int64_t ldb, float* C, int64_t ldc) {
  const dnnl_status_t st = dnnl_sgemm(ta, tb, M, N, K, 1.f, A, lda, B, ldb, 0.f, C, ldc);
  MRMF_CHECK(st == dnnl_success, "dnnl_sgemm(", ta, tb, ", M=", M, ", N=", N, ", K=", K, ") failed with status ",
             static_cast<int>(st));
}

}  // namespace mrmf
