#pragma once

#include "kernels/dispatch.h"

namespace mrmf::kernels {
MRMF_BOTH_BACKENDS(void strided_copy(const Tensor& dst, const Tensor& src, Stream& s))

// dst <- src element-wise for any strides (same device, shape and dtype).
inline void strided_copy(const Tensor& dst, const Tensor& src, Stream& s) {
  check_devices("strided_copy", s, {&dst, &src});
  MRMF_DISPATCH(s, strided_copy(dst, src, s));
}
}  // namespace mrmf::kernels
