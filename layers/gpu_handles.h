// cuDNN and cuBLAS handles of one Context (CUDA builds only), plus the
// per-shape convolution algorithm cache. Created lazily, destroyed with the
// Context (never at static exit).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include "core/stream.h"

namespace mrmf {

struct GpuHandles {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
};

GpuHandles* create_gpu_handles(Device device, Stream& stream);
void destroy_gpu_handles(GpuHandles* h);  // noexcept in practice: only logs on failure

}  // namespace mrmf
