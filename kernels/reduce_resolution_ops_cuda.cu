#define MRMF_BACKEND_NS cuda
#include "kernels/launch_cuda.cuh"
#include "kernels/reduce_resolution_ops.inl"
