#define MRMF_BACKEND_NS cuda
#include "kernels/launch_cuda.cuh"
#include "kernels/fused_downsample_ops.inl"
