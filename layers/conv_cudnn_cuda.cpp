// cuDNN convolution backend (see layers/conv_cudnn.h).
#include <map>
#include <vector>

#include "core/check_cuda.h"
#include "kernels/elementwise_ops.h"
#include "layers/conv_cudnn.h"
#include "layers/cudnn_descriptors.h"
#include "layers/gpu_handles.h"

namespace mrmf::cudnn_conv {

namespace {

// Descriptors and chosen algorithms for one input shape.
struct Plan {
  cudnn::TensorDesc x, y;
  cudnn::FilterDesc w;
  cudnn::ConvDesc conv;
  struct Choice {
    int algo = 0;
    size_t workspace = 0;
    cudnnMathType_t math = CUDNN_FMA_MATH;
  };
  Choice fwd, bwd_data, bwd_filter;
  bool have_forward = false, have_bwd_data = false, have_bwd_filter = false;
};

// The first result (heuristics and cudnnFind both list them best first) that
// succeeded, fits the workspace cap, uses an allowed math type (FMA only
// unless TF32 is allowed) and, when asked, is deterministic.
template <class Perf>
bool pick(const std::vector<Perf>& perf, int n, size_t limit, const Context& ctx, Plan::Choice& out) {
  for (int i = 0; i < n; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > limit) continue;
    if (p.mathType != CUDNN_FMA_MATH && !(ctx.allow_tf32() && p.mathType == CUDNN_DEFAULT_MATH)) continue;
    if (ctx.deterministic() && p.determinism == CUDNN_NON_DETERMINISTIC) continue;
    out.algo = static_cast<int>(p.algo);
    out.math = p.mathType;
    return true;
  }
  return false;
}

// The largest workspace any allowed candidate needs within the cap, from the
// heuristics' list: cudnnFind gets exactly that much, so a model whose
// convolutions need little never holds a cap-sized buffer.
template <class Perf>
size_t search_workspace(const std::vector<Perf>& perf, int n, size_t limit) {
  size_t ws = 0;
  for (int i = 0; i < n; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= limit && p.memory > ws) ws = p.memory;
  }
  return ws;
}

// The math type the descriptor carries while algorithms are searched: with
// DEFAULT math cuDNN may offer TF32 tensor-core kernels for FP32 data, with
// FMA math only FP32 ones.
cudnnMathType_t search_math(const Context& ctx) { return ctx.allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH; }

// What every direction does to choose its algorithm: the heuristics' list
// (always: it bounds the search workspace), the timed search when asked, the
// first allowed result or `fallback`, and the chosen algorithm's real
// workspace (the heuristics' memory estimate can differ from it). The
// direction-specific cuDNN calls come in as `heuristics`, `search` and
// `workspace_of`.
template <class Perf, class Heuristics, class Search, class WorkspaceOf>
Plan::Choice choose(Context& ctx, cudnnConvolutionDescriptor_t conv, int count, int fallback, Heuristics heuristics,
                    Search search, WorkspaceOf workspace_of) {
  const size_t limit = ctx.options().workspace_limit_bytes;
  MRMF_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, search_math(ctx)));
  std::vector<Perf> perf(static_cast<size_t>(count));
  int n = 0;
  MRMF_CUDNN_CHECK(heuristics(count, &n, perf.data()));
  if (ctx.cudnn_benchmark()) {
    const size_t ws = search_workspace(perf, n, limit);
    MRMF_CUDNN_CHECK(search(count, &n, perf.data(), ctx.workspace(ws), ws));
    ctx.release_workspace();
  }
  Plan::Choice c;
  if (!pick(perf, n, limit, ctx, c)) c = {fallback};
  MRMF_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, c.math));
  MRMF_CUDNN_CHECK(workspace_of(c.algo, &c.workspace));
  return c;
}

}  // namespace

std::pair<std::vector<int>, std::vector<int>> pad_stride(const ConvSpec& spec) {
  std::vector<int> pad, stride;
  if (spec.dims == 1) {  // 1-D runs as 2-D with H = 1
    pad.push_back(0);
    stride.push_back(1);
  }
  for (int i = 0; i < spec.dims; ++i) {
    MRMF_CHECK_KIND(Shape, spec.pad[i] <= INT32_MAX && spec.stride[i] <= INT32_MAX, "cuDNN convolution: padding ",
                    spec.pad[i], " / stride ", spec.stride[i], " out of range");
    pad.push_back(static_cast<int>(spec.pad[i]));
    stride.push_back(static_cast<int>(spec.stride[i]));
  }
  return {pad, stride};
}

// Algorithms are chosen lazily, at the first call of each direction, where
// the real buffers exist: cudnnFind*Ex runs every candidate on them (writing
// only the output being computed anyway) in a workspace as large as the
// largest candidate within the cap needs, released afterwards.
struct Plans::Impl {
  std::map<std::vector<int64_t>, std::unique_ptr<Plan>> cache;
  size_t builds = 0;

  Plan& plan(Context& ctx, const ConvSpec& spec, const Shape& x) {
    std::vector<int64_t> key = x.vec();
    key.push_back(ctx.deterministic());
    key.push_back(static_cast<int64_t>(ctx.options().workspace_limit_bytes));
    key.push_back(ctx.allow_tf32());
    key.push_back(ctx.cudnn_benchmark());
    auto it = cache.find(key);
    if (it != cache.end()) return *it->second;
    if (cache.size() >= 8) cache.clear();  // a layer sees few shapes; keep the cache bounded
    auto p = std::make_unique<Plan>();
    p->x.set(x);
    p->y.set(spec.output_shape_unchecked(x));
    p->w.set(spec.weight_shape());
    const auto [pad, stride] = pad_stride(spec);
    p->conv.set(pad, stride, /*allow_tensor_ops=*/false);
    ++builds;
    return *cache.emplace(std::move(key), std::move(p)).first->second;
  }

  // Implicit GEMM needs no workspace and is deterministic: always valid.
  static void choose_forward(Context& ctx, Plan& p, const void* x, const void* w, void* y) {
    cudnnHandle_t h = ctx.gpu().cudnn;
    using Perf = cudnnConvolutionFwdAlgoPerf_t;
    p.fwd = choose<Perf>(
        ctx, p.conv, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        [&](int k, int* n, Perf* r) { return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, k, n, r); },
        [&](int k, int* n, Perf* r, void* ws, size_t bytes) {
          return cudnnFindConvolutionForwardAlgorithmEx(h, p.x, x, p.w, w, p.conv, p.y, y, k, n, r, ws, bytes);
        },
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y,
                                                         static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
        });
    p.have_forward = true;
  }

  // ALGO_1 is the deterministic fallback (ALGO_0 and 3 use atomics).
  static void choose_bwd_filter(Context& ctx, Plan& p, const void* x, const void* dy, void* dw) {
    cudnnHandle_t h = ctx.gpu().cudnn;
    using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
    p.bwd_filter = choose<Perf>(
        ctx, p.conv, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        [&](int k, int* n, Perf* r) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv, p.w, k, n, r);
        },
        [&](int k, int* n, Perf* r, void* ws, size_t bytes) {
          return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x, x, p.y, dy, p.conv, p.w, dw, k, n, r, ws, bytes);
        },
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              h, p.x, p.y, p.conv, p.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
        });
    p.have_bwd_filter = true;
  }

  // ALGO_1 is the deterministic fallback (ALGO_0 uses atomics).
  static void choose_bwd_data(Context& ctx, Plan& p, const void* w, const void* dy, void* dx) {
    cudnnHandle_t h = ctx.gpu().cudnn;
    using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
    p.bwd_data = choose<Perf>(
        ctx, p.conv, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        [&](int k, int* n, Perf* r) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x, k, n, r);
        },
        [&](int k, int* n, Perf* r, void* ws, size_t bytes) {
          return cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, w, p.y, dy, p.conv, p.x, dx, k, n, r, ws, bytes);
        },
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, p.conv, p.x,
                                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
        });
    p.have_bwd_data = true;
  }
};

Plans::Plans() : impl_(std::make_unique<Impl>()) {}
Plans::~Plans() = default;
size_t Plans::builds() const { return impl_->builds; }

void Plans::forward(Context& ctx, const ConvSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b,
                    const Tensor& y) {
  Plan& p = impl_->plan(ctx, spec, x.shape());
  if (!p.have_forward) Impl::choose_forward(ctx, p, x.raw_data(), w.raw_data(), y.raw_data());
  cudnnHandle_t h = ctx.gpu().cudnn;
  const float one = 1.f, zero = 0.f;
  void* ws = ctx.workspace(p.fwd.workspace);
  MRMF_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.fwd.math));
  MRMF_CUDNN_CHECK(cudnnConvolutionForward(h, &one, p.x, x.raw_data(), p.w, w.raw_data(), p.conv,
                                           static_cast<cudnnConvolutionFwdAlgo_t>(p.fwd.algo), ws, p.fwd.workspace,
                                           &zero, p.y, y.raw_data()));
  if (b.defined()) kernels::bias_add(ctx.stream(), y, b);
}

void Plans::backward(Context& ctx, const ConvSpec& spec, const Tensor& x, const Tensor& dy, const Tensor& w,
                     const Tensor& dx, const Tensor& dw, const Tensor& db) {
  Plan& p = impl_->plan(ctx, spec, x.shape());
  if (!p.have_bwd_filter) Impl::choose_bwd_filter(ctx, p, x.raw_data(), dy.raw_data(), dw.raw_data());
  cudnnHandle_t h = ctx.gpu().cudnn;
  const float one = 1.f, zero = 0.f;  // beta = 0: gradients are overwritten
  void* ws = ctx.workspace(p.bwd_filter.workspace);
  MRMF_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.bwd_filter.math));
  MRMF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, p.x, x.raw_data(), p.y, dy.raw_data(), p.conv,
                                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.bwd_filter.algo), ws,
                                                  p.bwd_filter.workspace, &zero, p.w, dw.raw_data()));
  // A deterministic segmented sum (cudnnConvolutionBackwardBias would use atomics on some shapes).
  if (db.defined()) kernels::bias_grad(ctx.stream(), dy, db);
  if (dx.defined()) {
    if (!p.have_bwd_data) Impl::choose_bwd_data(ctx, p, w.raw_data(), dy.raw_data(), dx.raw_data());
    ws = ctx.workspace(p.bwd_data.workspace);
    MRMF_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.bwd_data.math));
    MRMF_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, p.w, w.raw_data(), p.y, dy.raw_data(), p.conv,
                                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(p.bwd_data.algo), ws,
                                                  p.bwd_data.workspace, &zero, p.x, dx.raw_data()));
  }
}

}  // namespace mrmf::cudnn_conv
