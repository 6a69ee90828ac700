#include "kernels/dispatch.h"

namespace mrmf::kernels {

void no_cuda_backend(const char* op) {
  MRMF_THROW(Device, op, ": tensor is on a CUDA device but mrmf was built without the CUDA backend");
}

void check_devices(const char* op, const Stream& s, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (!t || !t->defined()) continue;
    MRMF_CHECK_KIND(Device, t->device() == s.device(), op, ": tensor ", t->str(), " is not on the stream's device ",
                    s.device().str());
  }
}

void check_f32_contiguous(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (!t || !t->defined()) continue;
    MRMF_CHECK_KIND(Shape, t->dtype() == DType::F32, op, ": expected float32, got ", t->str());
    MRMF_CHECK_KIND(Shape, t->is_contiguous(), op, ": expected a contiguous tensor, got ", t->str());
  }
}

}  // namespace mrmf::kernels
