#include "kernels/launch_cuda.cuh"

namespace mrmf::kernels::cuda {

int max_grid_blocks() {
  // Per-thread cache: a rank uses one device, but tests may switch devices.
  thread_local int cached_device = -1, cached_blocks = 0;
  int dev = 0;
  MRMF_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != cached_device) {
    int sms = 0;
    MRMF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cached_device = dev;
    cached_blocks = 32 * sms;
  }
  return cached_blocks;
}

}  // namespace mrmf::kernels::cuda
