// Check macros for the CUDA runtime, cuDNN, cuBLAS and NCCL. Include only in
// translation units built with the CUDA backend (*.cu and *_cuda.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "core/error.h"

namespace mrmf::detail {
const char* cublas_status_text(cublasStatus_t s);
}

#define MRMF_CUDA_CHECK(call)                                                                                    \
  do {                                                                                                           \
    cudaError_t mrmf_st_ = (call);                                                                               \
    if (mrmf_st_ != cudaSuccess)                                                                                 \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Device, "CUDA", #call,                                      \
                                  std::string(cudaGetErrorName(mrmf_st_)) + ": " + cudaGetErrorString(mrmf_st_), \
                                  __FILE__, __LINE__);                                                           \
  } while (0)

#define MRMF_CUDNN_CHECK(call)                                                                           \
  do {                                                                                                   \
    cudnnStatus_t mrmf_st_ = (call);                                                                     \
    if (mrmf_st_ != CUDNN_STATUS_SUCCESS)                                                                \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Device, "cuDNN", #call, cudnnGetErrorString(mrmf_st_), \
                                  __FILE__, __LINE__);                                                   \
  } while (0)

#define MRMF_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                   \
    cublasStatus_t mrmf_st_ = (call);                                                                    \
    if (mrmf_st_ != CUBLAS_STATUS_SUCCESS)                                                               \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Device, "cuBLAS", #call,                            \
                                  ::mrmf::detail::cublas_status_text(mrmf_st_), __FILE__, __LINE__);     \
  } while (0)

#define MRMF_NCCL_CHECK(call)                                                                                  \
  do {                                                                                                         \
    ncclResult_t mrmf_st_ = (call);                                                                            \
    if (mrmf_st_ != ncclSuccess && mrmf_st_ != ncclInProgress)                                                 \
      ::mrmf::detail::throw_error(::mrmf::ErrorKind::Device, "NCCL", #call, ncclGetErrorString(mrmf_st_),      \
                                  __FILE__, __LINE__);                                                         \
  } while (0)

// Non-throwing variants for destructors: log and carry on.
#define MRMF_CUDA_WARN(call)                                                                                 \
  do {                                                                                                       \
    cudaError_t mrmf_st_ = (call);                                                                           \
    if (mrmf_st_ != cudaSuccess)                                                                             \
      ::mrmf::detail::warn_error("CUDA", #call, cudaGetErrorString(mrmf_st_), __FILE__, __LINE__);          \
  } while (0)

#define MRMF_CUDNN_WARN(call)                                                                                \
  do {                                                                                                       \
    cudnnStatus_t mrmf_st_ = (call);                                                                         \
    if (mrmf_st_ != CUDNN_STATUS_SUCCESS)                                                                    \
      ::mrmf::detail::warn_error("cuDNN", #call, cudnnGetErrorString(mrmf_st_), __FILE__, __LINE__);        \
  } while (0)

#define MRMF_CUBLAS_WARN(call)                                                                               \
  do {                                                                                                       \
    cublasStatus_t mrmf_st_ = (call);                                                                        \
    if (mrmf_st_ != CUBLAS_STATUS_SUCCESS)                                                                   \
      ::mrmf::detail::warn_error("cuBLAS", #call, ::mrmf::detail::cublas_status_text(mrmf_st_), __FILE__,    \
                                 __LINE__);                                                                  \
  } while (0)

#define MRMF_NCCL_WARN(call)                                                                                 \
  do {                                                                                                       \
    ncclResult_t mrmf_st_ = (call);                                                                          \
    if (mrmf_st_ != ncclSuccess)                                                                             \
      ::mrmf::detail::warn_error("NCCL", #call, ncclGetErrorString(mrmf_st_), __FILE__, __LINE__);          \
  } while (0)
