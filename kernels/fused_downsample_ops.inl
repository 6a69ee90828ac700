// Backend bodies of the fused raw-data downsample; see kernels/dispatch.h.
#include "kernels/fused_downsample.h"
#include "kernels/fused_downsample_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

namespace {
template <RawType R, FusedTransform TF>
void run2(Stream& s, const void* x, const FusedOutputs& o, const FusedGeom& g) {
  using T = typename RawLoad<R>::T;
  const FusedDownsample<R, TF> f{static_cast<const T*>(x), o, g};
#if defined(__CUDACC__)
  launch(s.native(), g.calls(), f);
#else
  // Own loop rather than launch(): a call is a whole row here, so the
  // parallel threshold is on the elements touched, not on the call count.
  const int64_t calls = g.calls();
  const bool par = calls > 1 && g.n * g.c * g.in[0] * g.in[1] * g.in[2] >= (int64_t(1) << 15);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < calls; ++i) f.row_cpu(i);
#endif
}

template <RawType R>
void run(Stream& s, const void* x, const FusedOutputs& o, const FusedGeom& g) {
  switch (g.transform) {
    case FusedTransform::None: run2<R, FusedTransform::None>(s, x, o, g); break;
    case FusedTransform::Log1p: run2<R, FusedTransform::Log1p>(s, x, o, g); break;
    case FusedTransform::Scale: run2<R, FusedTransform::Scale>(s, x, o, g); break;
  }
}
}  // namespace

void fused_downsample(Stream& s, const void* x, RawType r, const FusedOutputs& o, FusedGeom g) {
#if defined(__CUDACC__)
  g.chunk = 1;  // one coarse position per thread: coalesced neighbours
#else
  g.chunk = g.nblk[2];  // whole rows per call: index math once per row
#endif
  g.finalize();
  switch (r) {
    case RawType::U16: run<RawType::U16>(s, x, o, g); break;
    case RawType::I16: run<RawType::I16>(s, x, o, g); break;
    case RawType::F16: run<RawType::F16>(s, x, o, g); break;
    case RawType::F32: run<RawType::F32>(s, x, o, g); break;
  }
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
