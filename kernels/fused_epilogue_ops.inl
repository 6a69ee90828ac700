// Backend bodies for the fused epilogue family; see kernels/dispatch.h.
#include "kernels/fused_epilogue.h"
#include "kernels/fused_epilogue_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

namespace {
inline BnActParams bn_act_params(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                                 const Tensor& beta, const EpilogueGeom& e) {
  BnActParams p;
  p.x = x.data<float>();
  if (mean.defined()) {
    p.mean = mean.data<float>();
    p.invstd = invstd.data<float>();
    p.gamma = gamma.data<float>();
    p.beta = beta.data<float>();
  }
  p.act = e.act;
  p.slope = e.slope;
  p.channels = x.size(1);
  return p;
}
}  // namespace

void fused_epilogue_forward(Stream& s, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                            const Tensor& beta, const Tensor& y, const Tensor& argmax, const EpilogueGeom& e) {
  const BnActParams p = bn_act_params(x, mean, invstd, gamma, beta, e);
  const PoolGeom& g = e.g;
  float* yp = y.data<float>();
  const int64_t n_out = g.planes * g.out_plane();
  switch (e.pool) {
    case PoolKind::None:
      launch(s.native(), x.numel(), BnActForward{p, yp, ChannelIndex(x.size(1), g.in[2])});
      break;
    case PoolKind::Max: {
      int32_t* am = argmax.defined() ? argmax.data<int32_t>() : nullptr;
#ifdef MRMF_POOL_ROWS
      if (pool_is_dense(g)) return max_pool_rows_forward(LoadBnAct{p}, yp, am, g);
#endif
      if (pool_is_1d(g))
        launch(s.native(), n_out, MaxPoolForwardT<1, LoadBnAct>{LoadBnAct{p}, yp, am, g});
      else
        launch(s.native(), n_out, MaxPoolForwardT<3, LoadBnAct>{LoadBnAct{p}, yp, am, g});
      break;
    }
    case PoolKind::Avg:
#ifdef MRMF_POOL_ROWS
      if (pool_is_dense(g)) return avg_pool_rows_forward(LoadBnAct{p}, yp, g);
#endif
      if (pool_is_1d(g))
        launch(s.native(), n_out, AvgPoolForwardT<1, LoadBnAct>{LoadBnAct{p}, yp, g});
      else
        launch(s.native(), n_out, AvgPoolForwardT<3, LoadBnAct>{LoadBnAct{p}, yp, g});
      break;
  }
}

void fused_epilogue_backward(Stream& s, const Tensor& x, const Tensor& dy, const Tensor& argmax, const Tensor& mean,
                             const Tensor& invstd, const Tensor& gamma, const Tensor& beta, const Tensor& dz,
                             const EpilogueGeom& e) {
  const BnActParams p = bn_act_params(x, mean, invstd, gamma, beta, e);
  const PoolGeom& g = e.g;
  const float* dyp = dy.data<float>();
  float* dzp = dz.data<float>();
  const int64_t n_in = x.numel();
  switch (e.pool) {
    case PoolKind::None:
      launch(s.native(), n_in, BnActBackward{p, dyp, dzp, ChannelIndex(x.size(1), g.in[2])});
      break;
    case PoolKind::Max:
#ifdef MRMF_POOL_ROWS
      if (pool_is_dense(g)) return max_pool_rows_backward(PostBnAct{p}, dyp, argmax.data<int32_t>(), dzp, g);
#endif
      if (pool_is_1d(g))
        launch(s.native(), n_in, MaxPoolBackwardT<1, PostBnAct>{PostBnAct{p}, dyp, argmax.data<int32_t>(), dzp, g});
      else
        launch(s.native(), n_in, MaxPoolBackwardT<3, PostBnAct>{PostBnAct{p}, dyp, argmax.data<int32_t>(), dzp, g});
      break;
    case PoolKind::Avg:
#ifdef MRMF_POOL_ROWS
      if (pool_is_dense(g)) return avg_pool_rows_backward(PostBnAct{p}, dyp, dzp, g);
#endif
      if (pool_is_1d(g))
        launch(s.native(), n_in, AvgPoolBackwardT<1, PostBnAct>{PostBnAct{p}, dyp, dzp, g});
      else
        launch(s.native(), n_in, AvgPoolBackwardT<3, PostBnAct>{PostBnAct{p}, dyp, dzp, g});
      break;
  }
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
