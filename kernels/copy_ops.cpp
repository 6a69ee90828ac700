#define MRMF_BACKEND_NS cpu
#include "kernels/launch_cpu.h"
#include "kernels/copy_ops.inl"
