#include "layers/conv_single_output.h"

#include <algorithm>
#include <cstring>

#include "kernels/elementwise_ops.h"
#include "layers/cpu_sgemm.h"

namespace mrmf::onednn_conv {

namespace {
// The gathers and scatters move a few MB at most; below this many elements
// an OpenMP region costs more than it saves.
constexpr int64_t kParallelElements = int64_t(1) << 15;

// Rows of `width` elements: dst[r, v] = src[r, idx[v]] for v < V. The
// weights ([O I, taps] -> the valid taps) and the input ([N I, positions] ->
// im2col) are both such gathers.
void gather_rows(const float* src, int64_t rows, int64_t width, const std::vector<int64_t>& idx, float* dst) {
  const int64_t V = static_cast<int64_t>(idx.size());
  const int64_t* ix = idx.data();
#pragma omp parallel for schedule(static) if (rows * width >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < V; ++v) dst[r * V + v] = src[r * width + ix[v]];
}

// The inverse: dst[r, idx[v]] = src[r, v], and 0 elsewhere in each row.
void scatter_rows(const float* src, int64_t rows, int64_t width, const std::vector<int64_t>& idx, float* dst) {
  const int64_t V = static_cast<int64_t>(idx.size());
  const int64_t* ix = idx.data();
#pragma omp parallel for schedule(static) if (rows * width >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = dst + r * width;
    std::memset(row, 0, sizeof(float) * static_cast<size_t>(width));
    for (int64_t v = 0; v < V; ++v) row[ix[v]] = src[r * V + v];
  }
}
}  // namespace

bool SingleOutputConv::applies(const ConvSpec& spec, const Shape& x) {
  const Shape y = spec.output_shape_unchecked(x);
  for (int d = 0; d < spec.dims; ++d)
    if (y[2 + d] != 1) return false;
  return true;
}

void SingleOutputConv::plan(const ConvSpec& spec, const Shape& x) {
  if (x == planned_) return;
  // The single output sits at position 0, so tap k of dimension d meets
  // input index k - pad[d] (whatever the stride); valid taps, in row-major
  // order, meet input positions in row-major order too.
  std::vector<int64_t> lo(spec.dims), hi(spec.dims);
  taps_ = positions_ = 1;
  for (int d = 0; d < spec.dims; ++d) {
    const int64_t S = x[2 + d], K = spec.kernel[d], P = spec.pad[d];
    lo[d] = std::min(P, K);
    hi[d] = std::min(K, P + S);
    taps_ *= K;
    positions_ *= S;
  }
  tap_.clear();
  pos_.clear();
  std::vector<int64_t> k(lo);
  bool none = false;  // no tap meets the input in some dimension
  for (int d = 0; d < spec.dims; ++d) none = none || lo[d] >= hi[d];
  while (!none) {
    int64_t t = 0, p = 0;
    for (int d = 0; d < spec.dims; ++d) {
      t = t * spec.kernel[d] + k[d];
      p = p * x[2 + d] + (k[d] - spec.pad[d]);
    }
    tap_.push_back(t);
    pos_.push_back(p);
    int d = spec.dims - 1;  // odometer over the valid taps
    for (; d >= 0 && ++k[d] == hi[d]; --d) k[d] = lo[d];
    if (d < 0) break;
  }
  dense_ = static_cast<int64_t>(pos_.size()) == positions_;
  planned_ = x;
}

void SingleOutputConv::gather_weights(const ConvSpec& spec, const float* w) {
  const int64_t rows = spec.out_channels * spec.in_channels;
  wv_.resize(static_cast<size_t>(rows) * tap_.size());
  gather_rows(w, rows, taps_, tap_, wv_.data());
}

const float* SingleOutputConv::columns(const Tensor& x) {
  if (dense_) return x.data<float>();
  const int64_t rows = x.size(0) * x.size(1);
  cols_.resize(static_cast<size_t>(rows) * pos_.size());
  gather_rows(x.data<float>(), rows, positions_, pos_, cols_.data());
  return cols_.data();
}

void SingleOutputConv::forward(const ConvSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b,
                               const Tensor& y) {
  plan(spec, x.shape());
  const int64_t N = x.size(0), O = spec.out_channels, I = spec.in_channels;
  const int64_t V = static_cast<int64_t>(tap_.size()), IV = I * V;
  float* yp = y.data<float>();
  if (N == 0) return;
  if (V == 0) {
    std::fill(yp, yp + N * O, 0.f);  // no tap meets the input: the output is the bias
  } else {
    const float* cols = columns(x);
    gather_weights(spec, w.data<float>());
    cpu_sgemm('N', 'T', N, O, IV, cols, IV, wv_.data(), IV, yp, O);  // y[N, O] = cols W_v^T
  }
  if (spec.bias) kernels::bias_add(cpu_stream(), y, b);
}

void SingleOutputConv::backward(const ConvSpec& spec, const Tensor& x, const Tensor& dy, const Tensor& w,
                                const Tensor& dx, const Tensor& dw, const Tensor& db) {
  plan(spec, x.shape());
  const int64_t N = x.size(0), O = spec.out_channels, I = spec.in_channels, S = positions_, K = taps_;
  const int64_t V = static_cast<int64_t>(tap_.size()), IV = I * V;
  const float* dyp = dy.data<float>();

  if (db.defined()) kernels::bias_grad(cpu_stream(), dy, db);

  // Weights: dW_v[O, I V] = dy^T cols, scattered into the full kernel
  // (zero for the taps that meet no input).
  float* dwp = dw.data<float>();
  if (N == 0 || V == 0) {
    std::memset(dwp, 0, sizeof(float) * static_cast<size_t>(O * I * K));
  } else {
    const float* cols = columns(x);  // again: an evaluation forward may have run since
    grad_.resize(static_cast<size_t>(O * IV));
    cpu_sgemm('T', 'N', O, IV, N, dyp, O, cols, IV, grad_.data(), IV);
    scatter_rows(grad_.data(), O * I, K, tap_, dwp);
  }

  // Input: dcols[N, I V] = dy W_v, scattered into dx (zero where no tap meets).
  if (!dx.defined()) return;
  float* dxp = dx.data<float>();
  if (N == 0 || V == 0) {
    std::memset(dxp, 0, sizeof(float) * static_cast<size_t>(N * I * S));
    return;
  }
  gather_weights(spec, w.data<float>());
  if (dense_) {
    cpu_sgemm('N', 'N', N, IV, O, dyp, O, wv_.data(), IV, dxp, IV);
    return;
  }
  grad_.resize(static_cast<size_t>(N * IV));
  cpu_sgemm('N', 'N', N, IV, O, dyp, O, wv_.data(), IV, grad_.data(), IV);
  scatter_rows(grad_.data(), N * I, S, pos_, dxp);
}

}  // namespace mrmf::onednn_conv
