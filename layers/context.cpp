#include "layers/context.h"

#include "core/error.h"
#ifdef MRMF_HAVE_CUDA
#include "layers/gpu_handles.h"
#endif

namespace mrmf {

Context::Context(Device device, ContextOptions opts)
    : device_(device), opts_(opts), stream_(device.is_cuda() ? Stream::create(device) : Stream()) {}

Context::~Context() = default;
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;

void* Context::workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (!workspace_.defined() || workspace_.nbytes() < bytes) {
    // Grow geometrically so a sequence of slightly larger requests does not reallocate each time.
    size_t want = workspace_.defined() ? std::max(bytes, workspace_.nbytes() * 3 / 2) : bytes;
    stream_.synchronize();  // the old block may still be in use by queued work
    workspace_ = Tensor::empty({static_cast<int64_t>(want)}, DType::U8, device_);
  }
  return workspace_.raw_data();
}

void Context::release_workspace() {
  if (!workspace_.defined()) return;
  stream_.synchronize();  // queued work may still use it
  workspace_ = Tensor();
}

GpuHandles& Context::gpu() {
#ifdef MRMF_HAVE_CUDA
  MRMF_CHECK_KIND(Device, device_.is_cuda(), "GPU library handles requested on ", device_.str());
  if (!gpu_) gpu_ = {create_gpu_handles(device_, stream_), &destroy_gpu_handles};
  return *gpu_;
#else
  MRMF_THROW(Device, "GPU library handles requested but mrmf was built without CUDA");
#endif
}

}  // namespace mrmf
