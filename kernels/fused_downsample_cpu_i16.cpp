// The fused downsample's CPU kernels for int16 inputs (every transform), in a
// translation unit of their own; see kernels/fused_downsample_run.inl.
#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/fused_downsample_run.inl"

MRMF_FUSED_DOWNSAMPLE_RUN(I16);
