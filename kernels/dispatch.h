// Backend dispatch for kernel families.
//
// A family `foo` has:
//   kernels/foo.h            the functors (the math, once; __host__ __device__)
//   kernels/foo_ops.inl      Tensor-level bodies written against `launch` / `segmented_sum`,
//                            in namespace MRMF_BACKEND_NS
//   kernels/foo_ops.cpp      #define MRMF_BACKEND_NS cpu  + launch_cpu.h    + the .inl
//   kernels/foo_ops_cuda.cu  #define MRMF_BACKEND_NS cuda + launch_cuda.cuh + the .inl
//   kernels/foo_ops.h        declarations for both namespaces (MRMF_BOTH_BACKENDS) and the
//                            public, checked functions that dispatch on the stream's device.
#pragma once

#include <string>

#include "core/error.h"
#include "core/tensor.h"

#define MRMF_BOTH_BACKENDS(decl) \
  namespace cpu {                \
  decl;                          \
  }                              \
  namespace cuda {               \
  decl;                          \
  }

namespace mrmf::kernels {
[[noreturn]] void no_cuda_backend(const char* op);
// Checks that every tensor lives on the stream's device (names the op).
void check_devices(const char* op, const Stream& s, std::initializer_list<const Tensor*> ts);
// Checks float32 + contiguous (the custom kernels' contract).
void check_f32_contiguous(const char* op, std::initializer_list<const Tensor*> ts);
}  // namespace mrmf::kernels

#ifdef MRMF_HAVE_CUDA
#define MRMF_DISPATCH(stream, call)        \
  do {                                     \
    if ((stream).device().is_cuda())       \
      ::mrmf::kernels::cuda::call;         \
    else                                   \
      ::mrmf::kernels::cpu::call;          \
  } while (0)
#else
#define MRMF_DISPATCH(stream, call)                      \
  do {                                                   \
    if ((stream).device().is_cuda())                     \
      ::mrmf::kernels::no_cuda_backend(#call);           \
    else                                                 \
      ::mrmf::kernels::cpu::call;                        \
  } while (0)
#endif
