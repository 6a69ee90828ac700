// Backend bodies for the resolution reducer; see kernels/dispatch.h.
#include "kernels/reduce_resolution.h"
#include "kernels/reduce_resolution_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

void reduce_resolution_forward(Stream& s, const Tensor& x, const Tensor& y, const ReduceGeom& g) {
  launch(s.native(), g.planes * g.out_plane(), ReduceResolutionForward{x.data<float>(), y.data<float>(), g});
}

void reduce_resolution_backward(Stream& s, const Tensor& dy, const Tensor& dx, const ReduceGeom& g) {
  launch(s.native(), g.planes * g.in_plane(), ReduceResolutionBackward{dy.data<float>(), dx.data<float>(), g});
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
