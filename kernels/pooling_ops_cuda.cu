#define MRMF_BACKEND_NS cuda
#include "kernels/launch_cuda.cuh"
#include "kernels/pooling_ops.inl"
