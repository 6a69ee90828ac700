#include "layers/gpu_handles.h"

#include <memory>

#include "core/check_cuda.h"

namespace mrmf {

GpuHandles* create_gpu_handles(Device device, Stream& stream) {
  set_current_device(device);
  auto h = std::make_unique<GpuHandles>();
  MRMF_CUDNN_CHECK(cudnnCreate(&h->cudnn));
  MRMF_CUDNN_CHECK(cudnnSetStream(h->cudnn, static_cast<cudaStream_t>(stream.native())));
  MRMF_CUBLAS_CHECK(cublasCreate(&h->cublas));
  MRMF_CUBLAS_CHECK(cublasSetStream(h->cublas, static_cast<cudaStream_t>(stream.native())));
  // FP32 GEMMs stay FP32 unless the user opts into TF32 (MRMF_ALLOW_TF32=1).
  const char* tf32 = std::getenv("MRMF_ALLOW_TF32");
  MRMF_CUBLAS_CHECK(cublasSetMathMode(h->cublas, tf32 && tf32[0] == '1' ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return h.release();
}

void destroy_gpu_handles(GpuHandles* h) {
  if (!h) return;
  if (h->cublas) MRMF_CUBLAS_WARN(cublasDestroy(h->cublas));
  if (h->cudnn) MRMF_CUDNN_WARN(cudnnDestroy(h->cudnn));
  delete h;
}

}  // namespace mrmf
