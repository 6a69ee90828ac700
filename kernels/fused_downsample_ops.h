// Fused raw-data downsample ops (see kernels/fused_downsample.h); dispatch on
// the stream's device.
//
//   x  : raw contiguous tensor, dtype U16, I16, F16 (binary16 bits) or F32,
//        [N, s1..sk, C] (ChannelsLast, the files' layout) or [N, C, s1..sk]
//        (ChannelsFirst: LBANN `full`, or the Neuron Inverter `view(-1, C, T)`
//        quirk -- pass frames.view({N, C, T})), k = 1..3 spatial axes;
//   ys : one float32 contiguous tensor per level, [N, C, s1/f1, ..., sk/fk], on x's device.
// Every level's factors must divide the per-axis maximum over levels (nested
// levels such as 1, 2, 8 or 2x2x2 and 4x4x4), and that maximum must divide the
// axis (a Shape error names the axis, its length and the factor).
#pragma once

#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/fused_downsample.h"

namespace mrmf::kernels {

enum class InputLayout { ChannelsLast, ChannelsFirst };

struct FusedDownsampleSpec {
  InputLayout layout = InputLayout::ChannelsLast;
  FusedTransform transform = FusedTransform::None;
  std::vector<float> scale, shift;           // per channel, for FusedTransform::Scale (shift may be empty)
  std::vector<std::vector<int64_t>> levels;  // per level, one factor per spatial axis; empty = one level of 1s
  bool vector_loads = true;                  // GPU: see FusedGeom::allow_vector
  bool log1p_table = true;                   // see FusedGeom::allow_table
  bool log1p_product = true;                 // see FusedGeom::allow_product
  bool chain_preload = true;                 // GPU: see FusedGeom::chain_preload
  bool vector_preload = false;               // GPU: see FusedGeom::vector_preload
};

RawType raw_type_of(DType dt, const std::string& who);  // Shape error for unsupported types
// log1p_f32 of every 16-bit pattern of r (2^16 floats, host memory built on
// first use, thread-safe; FusedDownsample::lut): null for F32.
const float* log1p_table(RawType r);
FusedGeom make_fused_geom(const Shape& x, const FusedDownsampleSpec& spec, const std::string& who);
// The CPU rows' traversal of a geometry from make_fused_geom (the CPU
// backend's fused_downsample sets it before finalize()): axis 1 merged into
// the last where no level averages along it, whole rows per call, slabs of
// group1 blocks along axis 1 sized for `threads` OpenMP threads.
void set_cpu_rows_geometry(FusedGeom& g, RawType r, int threads);
std::vector<Shape> fused_downsample_shapes(const Shape& x, const FusedDownsampleSpec& spec, const std::string& who);

MRMF_BOTH_BACKENDS(void fused_downsample(Stream& s, const void* x, RawType r, const FusedOutputs& o, FusedGeom g))

// A request checked once and then run many times on raw pointers: the
// loader converts every batch with the same geometry, and the checked entry
// point's shape checks and vector allocations per call cost as much as the
// work for small samples (Neuron Inverter: 19 KB). `geom.n` is the sample
// count; with_samples() re-targets the plan to n contiguous samples.
struct FusedDownsamplePlan {
  RawType raw = RawType::F32;
  FusedGeom geom;
  FusedDownsamplePlan with_samples(int64_t n) const {
    FusedDownsamplePlan p = *this;
    p.geom.n = n;
    return p;
  }
};
FusedDownsamplePlan plan_fused_downsample(const Shape& x, DType dt, const FusedDownsampleSpec& spec,
                                          const std::string& who);
// x: contiguous input of the plan's shape on s's device; o.y[l]: level l's
// contiguous float32 output on the same device. Nothing is checked here.
void run_fused_downsample(Stream& s, const FusedDownsamplePlan& p, const void* x, const FusedOutputs& o);

// Checked entry points.
void fused_downsample(Stream& s, const Tensor& x, const std::vector<Tensor>& ys, const FusedDownsampleSpec& spec);
// Allocates the outputs on x's device.
std::vector<Tensor> fused_downsample(Stream& s, const Tensor& x, const FusedDownsampleSpec& spec);

}  // namespace mrmf::kernels
