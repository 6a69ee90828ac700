// Backend bodies for the pooling family; see kernels/dispatch.h.
#include "kernels/pooling.h"
#include "kernels/pooling_ops.h"

// MRMF_POOL_ROWS (CPU translation units only): dense geometries (stride ==
// kernel, no padding) take the row loops of kernels/pooling_rows_cpu.h.
namespace mrmf::kernels::MRMF_BACKEND_NS {

void max_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const Tensor& argmax, const PoolGeom& g) {
  const int64_t n = g.planes * g.out_plane();
  int32_t* am = argmax.defined() ? argmax.data<int32_t>() : nullptr;
#ifdef MRMF_POOL_ROWS
  if (pool_is_dense(g)) return max_pool_rows_forward(LoadPlain{x.data<float>()}, y.data<float>(), am, g);
#endif
  if (pool_is_1d(g))
    launch(s.native(), n, MaxPoolForward<1>{LoadPlain{x.data<float>()}, y.data<float>(), am, g});
  else
    launch(s.native(), n, MaxPoolForward<3>{LoadPlain{x.data<float>()}, y.data<float>(), am, g});
}

void max_pool_backward(Stream& s, const Tensor& dy, const Tensor& argmax, const Tensor& dx, const PoolGeom& g) {
  const int64_t n = g.planes * g.in_plane();
#ifdef MRMF_POOL_ROWS
  if (pool_is_dense(g))
    return max_pool_rows_backward(PostPlain{}, dy.data<float>(), argmax.data<int32_t>(), dx.data<float>(), g);
#endif
  if (pool_is_1d(g))
    launch(s.native(), n, MaxPoolBackward<1>{PostPlain{}, dy.data<float>(), argmax.data<int32_t>(), dx.data<float>(), g});
  else
    launch(s.native(), n, MaxPoolBackward<3>{PostPlain{}, dy.data<float>(), argmax.data<int32_t>(), dx.data<float>(), g});
}

void avg_pool_forward(Stream& s, const Tensor& x, const Tensor& y, const PoolGeom& g) {
  const int64_t n = g.planes * g.out_plane();
#ifdef MRMF_POOL_ROWS
  if (pool_is_dense(g)) return avg_pool_rows_forward(LoadPlain{x.data<float>()}, y.data<float>(), g);
#endif
  if (pool_is_1d(g))
    launch(s.native(), n, AvgPoolForward<1>{LoadPlain{x.data<float>()}, y.data<float>(), g});
  else
    launch(s.native(), n, AvgPoolForward<3>{LoadPlain{x.data<float>()}, y.data<float>(), g});
}

void avg_pool_backward(Stream& s, const Tensor& dy, const Tensor& dx, const PoolGeom& g) {
  const int64_t n = g.planes * g.in_plane();
#ifdef MRMF_POOL_ROWS
  if (pool_is_dense(g)) return avg_pool_rows_backward(PostPlain{}, dy.data<float>(), dx.data<float>(), g);
#endif
  if (pool_is_1d(g))
    launch(s.native(), n, AvgPoolBackward<1>{PostPlain{}, dy.data<float>(), dx.data<float>(), g});
  else
    launch(s.native(), n, AvgPoolBackward<3>{PostPlain{}, dy.data<float>(), dx.data<float>(), g});
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
