// Resolution reducer ops (see kernels/reduce_resolution.h); dispatch on the
// stream's device. x: [N, C, s1, ..., sk] (k = 1..3), float32 contiguous.
#pragma once

#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/reduce_resolution.h"

namespace mrmf::kernels {

// Geometry for input `in` with one factor per spatial axis (>= 1). Throws
// ErrorKind::Shape prefixed with `who` when the rank does not match the
// factors or an axis is shorter than its factor.
ReduceGeom make_reduce_geom(const Shape& in, const std::vector<int64_t>& factors, const std::string& who);
Shape reduce_resolution_shape(const Shape& in, const std::vector<int64_t>& factors, const std::string& who);

MRMF_BOTH_BACKENDS(void reduce_resolution_forward(Stream& s, const Tensor& x, const Tensor& y, const ReduceGeom& g))
MRMF_BOTH_BACKENDS(void reduce_resolution_backward(Stream& s, const Tensor& dy, const Tensor& dx, const ReduceGeom& g))

void reduce_resolution_forward(Stream& s, const Tensor& x, const Tensor& y, const std::vector<int64_t>& factors);
void reduce_resolution_backward(Stream& s, const Tensor& dy, const Tensor& dx, const std::vector<int64_t>& factors);

}  // namespace mrmf::kernels
