// Plain-loop reference implementations: the test oracles for library-backed
// ops (oneDNN / cuDNN convolutions, GEMM, BN) and for the custom kernels.
// Written for clarity, not speed; templated so they also run in double.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace mrmf::ref {

// y[n, o] = sum_i x[n, i] * w[o, i] + b[o]
std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                           int64_t N, int64_t in, int64_t out);

// Copies a CPU float tensor into a double vector and back.
std::vector<double> to_vec(const Tensor& t);
Tensor from_vec(const std::vector<double>& v, const Shape& s);

}  // namespace mrmf::ref
