// Max / average pooling ops ([N, C, L] and [N, C, D, H, W], float32 contiguous);
// dispatch on the stream's device. See kernels/pooling.h for the math.
#pragma once

#include <array>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/pooling.h"

namespace mrmf::kernels {

enum class PoolKind : uint8_t { None, Max, Avg };

// Pooling hyper-parameters. nd = 1: index 0 is L; nd = 3: indices (D, H, W).
struct PoolParams {
  int nd = 1;
  std::array<int64_t, 3> kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> padding{0, 0, 0};
  bool count_include_pad = true;  // average pooling only (PyTorch default)

  static PoolParams make_1d(int64_t k, int64_t s = 0, int64_t p = 0, bool include_pad = true);
  static PoolParams make_3d(std::array<int64_t, 3> k, std::array<int64_t, 3> s = {0, 0, 0},
                            std::array<int64_t, 3> p = {0, 0, 0}, bool include_pad = true);
  std::string str() const;  // "k=4 s=4 p=0" / "k=(2,2,2) s=(2,2,2) p=(0,0,0)"
};

// [N, C, out...] for input `in`. Throws ErrorKind::Shape prefixed with `who`
// (e.g. "MaxPool1d 'pool3'") when the rank is wrong, a window does not fit
// ("input length 3 < kernel 4"), or padding exceeds half the kernel.
Shape pool_output_shape(const Shape& in, const PoolParams& p, const std::string& who);
// The functor geometry for input `in` (checked as above).
PoolGeom make_pool_geom(const Shape& in, const PoolParams& p, const std::string& who);

MRMF_BOTH_BACKENDS(void max_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const Tensor& argmax,
                                         const PoolGeom& g))
MRMF_BOTH_BACKENDS(void max_pool_backward(Stream& s, const Tensor& dy, const Tensor& argmax, const Tensor& dx,
                                          const PoolGeom& g))
MRMF_BOTH_BACKENDS(void avg_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const PoolGeom& g))
MRMF_BOTH_BACKENDS(void avg_pool_backward(Stream& s, const Tensor& dy, const Tensor& dx, const PoolGeom& g))

// y = maxpool(x); argmax (int32, shape of y) may be undefined (inference).
void max_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const Tensor& argmax, const PoolParams& p);
// dx = gather of dy through argmax (every element of dx written).
void max_pool_backward(Stream& s, const Tensor& dy, const Tensor& argmax, const Tensor& dx, const PoolParams& p);
void avg_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const PoolParams& p);
void avg_pool_backward(Stream& s, const Tensor& dy, const Tensor& dx, const PoolParams& p);

}  // namespace mrmf::kernels
