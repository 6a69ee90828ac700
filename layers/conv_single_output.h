// A CPU convolution whose output has one spatial position, computed as GEMMs.
//
// CosmoFlow's last convolutions see a 1^3 input at 16^3-64^3 cubes (2^3 at
// 16^3 for conv4): 256 x 256 x 3^3 weights against 8 input values per
// channel. oneDNN 2.6 has no JIT kernel for the weight gradient there and
// falls back to im2col + GEMM over all 27 taps, 3-4 ms per layer and step on
// two cores, plus a 7 MB weight reorder in forward and again in backward --
// together most of a 16^3 training step, so that 16^3 epochs cost a third of
// 32^3 ones instead of an eighth. With one output position only the taps that
// meet the input matter (the centre tap alone for a 1^3 input with padding 1):
//   y[n, o]           = sum_(i, v) x[n, i, pos(v)] W[o, i, tap(v)] + b[o]
//   dx[n, i, pos(v)]  = sum_o dy[n, o] W[o, i, tap(v)]   (0 where no tap meets)
//   dW[o, i, tap(v)]  = sum_n dy[n, o] x[n, i, pos(v)]   (0 for the other taps)
// three small GEMMs over the V valid taps, plus a gather of those taps'
// weights and a scatter of their gradients into the full tensors.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "layers/conv.h"

namespace mrmf::onednn_conv {

class SingleOutputConv {
 public:
  // True when every spatial output size of `spec` on input shape `x` is 1.
  static bool applies(const ConvSpec& spec, const Shape& x);

  // Same contracts as Primitives::forward / backward (CPU, float32,
  // contiguous; dw and db overwritten; dx only when defined).
  void forward(const ConvSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
  void backward(const ConvSpec& spec, const Tensor& x, const Tensor& dy, const Tensor& w, const Tensor& dx,
                const Tensor& dw, const Tensor& db);

 private:
  void plan(const ConvSpec& spec, const Shape& x);
  void gather_weights(const ConvSpec& spec, const float* w);
  const float* columns(const Tensor& x);  // im2col of x over the valid taps ([N, I V]); x itself when dense_

  Shape planned_;                   // input shape the taps below are for
  std::vector<int64_t> tap_, pos_;  // valid taps (flat kernel index) and the input position each meets
  int64_t taps_ = 0, positions_ = 0;  // kernel volume, input spatial size
  bool dense_ = false;  // the valid taps meet every input position in order: x is its own im2col matrix
  // im2col [N, I V], valid-tap weights [O, I V] (gathered in forward and
  // again in backward: the weights may have changed in between, and the
  // oneDNN path also reads them afresh), GEMM output.
  std::vector<float> cols_, wv_, grad_;
};

}  // namespace mrmf::onednn_conv
