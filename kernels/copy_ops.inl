// Backend bodies for the copy family; see kernels/dispatch.h for the pattern.
#include "kernels/copy.h"
#include "kernels/copy_ops.h"

namespace mrmf::kernels::MRMF_BACKEND_NS {

namespace {
template <class T>
void strided_copy_typed(const Tensor& dst, const Tensor& src, Stream& s) {
  StridedIndex idx{};
  idx.ndim = dst.ndim();
  for (int d = 0; d < idx.ndim; ++d) {
    idx.shape[d] = dst.size(d);
    idx.src_stride[d] = src.stride(d);
    idx.dst_stride[d] = dst.stride(d);
  }
  launch(s.native(), dst.numel(), StridedCopy<T>{static_cast<T*>(dst.raw_data()), static_cast<const T*>(src.raw_data()), idx});
}
}  // namespace

void strided_copy(const Tensor& dst, const Tensor& src, Stream& s) {
  switch (dtype_size(dst.dtype())) {
    case 1: strided_copy_typed<uint8_t>(dst, src, s); break;
    case 2: strided_copy_typed<uint16_t>(dst, src, s); break;
    case 4: strided_copy_typed<uint32_t>(dst, src, s); break;
    case 8: strided_copy_typed<uint64_t>(dst, src, s); break;
    default: MRMF_THROW(Shape, "strided_copy: unsupported element size");
  }
}

}  // namespace mrmf::kernels::MRMF_BACKEND_NS
