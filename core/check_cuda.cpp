// cuBLAS has no public status-to-string function before 11.4 on every
// platform; cublasGetStatusString exists in 12+/13, used when available.
#ifdef MRMF_HAVE_CUDA
#include "core/check_cuda.h"

namespace mrmf::detail {
const char* cublas_status_text(cublasStatus_t s) { return cublasGetStatusString(s); }
}  // namespace mrmf::detail
#endif
