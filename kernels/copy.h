// Strided copy functor: dst (any strides) <- src (any strides), same shape.
// Used for transposes such as the Neuron Inverter's (N, T, C) -> (N, C, T).
#pragma once

#include "kernels/hd.h"

namespace mrmf::kernels {

struct StridedIndex {
  int ndim;
  int64_t shape[5];
  int64_t src_stride[5];
  int64_t dst_stride[5];
};

template <class T>
struct StridedCopy {
  T* dst;
  const T* src;
  StridedIndex idx;
  MRMF_HD void operator()(int64_t i) const {
    int64_t rem = i, so = 0, dof = 0;
    for (int d = idx.ndim - 1; d >= 0; --d) {
      const int64_t c = rem % idx.shape[d];
      rem /= idx.shape[d];
      so += c * idx.src_stride[d];
      dof += c * idx.dst_stride[d];
    }
    dst[dof] = src[so];
  }
};

}  // namespace mrmf::kernels
