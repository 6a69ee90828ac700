#include "core/tensor.h"

#include <cstring>
#include <sstream>

#include "kernels/copy_ops.h"

namespace mrmf {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::U16: return "uint16";
    case DType::I16: return "int16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
  }
  return "?";
}

std::string Shape::str() const {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < ndim_; ++i) os << (i ? ", " : "") << d_[i];
  os << "]";
  return os.str();
}

// ---------------------------------------------------------------- Storage
Storage::Storage(size_t bytes, Device device, bool pinned) : bytes_(bytes), device_(device) {
  if (device.is_cuda()) {
    kind_ = MemoryKind::Cuda;
    ptr_ = cuda_alloc(device.index, bytes);
  } else if (pinned) {
    kind_ = MemoryKind::Pinned;
    ptr_ = pinned_alloc(bytes);
  } else {
    kind_ = MemoryKind::Cpu;
    ptr_ = cpu_alloc(bytes);
  }
}

Storage::Storage(void* external, size_t bytes, Device device)
    : ptr_(external), bytes_(bytes), device_(device), kind_(device.is_cuda() ? MemoryKind::Cuda : MemoryKind::Cpu),
      owned_(false) {}

Storage::~Storage() {
  if (!owned_ || !ptr_) return;
  switch (kind_) {
    case MemoryKind::Cuda: cuda_free(device_.index, ptr_); break;
    case MemoryKind::Pinned: pinned_free(ptr_); break;
    case MemoryKind::Cpu: cpu_free(ptr_); break;
  }
}

// ---------------------------------------------------------------- Tensor
Strides Tensor::contiguous_strides(const Shape& s) {
  Strides st{};
  int64_t acc = 1;
  for (int i = s.ndim() - 1; i >= 0; --i) {
    st[static_cast<size_t>(i)] = acc;
    acc *= s[i];
  }
  return st;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, bool pinned) {
  Tensor t;
  // Checked: a shape read from a damaged or hostile file must not wrap.
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int i = 0; i < shape.ndim(); ++i) {
    MRMF_CHECK_KIND(Shape, shape[i] >= 0, "tensor shape ", shape.str(), " has a negative dimension");
    MRMF_CHECK_KIND(Shape, !__builtin_mul_overflow(bytes, shape[i], &bytes), "tensor shape ", shape.str(), " of ",
                    dtype_name(dtype), " is too large to address (more than 2^63 bytes)");
  }
  t.storage_ = std::make_shared<Storage>(static_cast<size_t>(bytes), device, pinned);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, Stream& stream) {
  Tensor t = empty(shape, dtype, device);
  t.zero_(stream);
  return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(data, static_cast<size_t>(shape.numel()) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

void* Tensor::raw_data() const {
  MRMF_CHECK(storage_ != nullptr, "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

Tensor Tensor::view(std::initializer_list<int64_t> dims) const { return view_dims(std::vector<int64_t>(dims)); }

Tensor Tensor::view(const Shape& requested) const { return view_dims(requested.vec()); }

Tensor Tensor::view_dims(std::vector<int64_t> dims) const {
  MRMF_CHECK_KIND(Shape, is_contiguous(), "view/reshape of a non-contiguous tensor ", str(),
                  " would need a copy; call contiguous() first");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      MRMF_CHECK_KIND(Shape, infer < 0, "view: only one dimension may be -1");
      infer = static_cast<int>(i);
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    MRMF_CHECK_KIND(Shape, known > 0 && numel() % known == 0, "view: cannot infer -1 for ", numel(),
                    " elements from ", known, " known elements");
    dims[static_cast<size_t>(infer)] = numel() / known;
  }
  Shape s(dims);
  MRMF_CHECK_KIND(Shape, s.numel() == numel(), "view: shape ", s.str(), " has ", s.numel(), " elements but ", str(),
                  " has ", numel());
  Tensor t = *this;
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::flatten_from(int dim) const {
  std::vector<int64_t> dims;
  int64_t rest = 1;
  for (int i = 0; i < ndim(); ++i) {
    if (i < dim) dims.push_back(shape_[i]);
    else rest *= shape_[i];
  }
  dims.push_back(rest);
  return view(Shape(dims));
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t length) const {
  if (dim < 0) dim += ndim();
  MRMF_CHECK_KIND(Shape, dim >= 0 && dim < ndim(), "narrow: dimension ", dim, " out of range for ", str());
  MRMF_CHECK_KIND(Shape, start >= 0 && length >= 0 && start + length <= shape_[dim], "narrow: [", start, ", ",
                  start + length, ") out of range for dimension ", dim, " of ", str());
  Tensor t = *this;
  t.offset_ += start * strides_[static_cast<size_t>(dim)];
  t.shape_[dim] = length;
  return t;
}

Tensor Tensor::transpose(int a, int b) const {
  if (a < 0) a += ndim();
  if (b < 0) b += ndim();
  MRMF_CHECK_KIND(Shape, a >= 0 && a < ndim() && b >= 0 && b < ndim(), "transpose: bad dimensions for ", str());
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[static_cast<size_t>(a)], t.strides_[static_cast<size_t>(b)]);
  return t;
}

Tensor Tensor::contiguous(Stream& stream) const {
  if (is_contiguous()) return *this;
  Tensor out = empty(shape_, dtype_, device());
  out.copy_from(*this, stream);
  return out;
}

Tensor Tensor::clone(Stream& stream) const {
  Tensor out = empty(shape_, dtype_, device());
  out.copy_from(*this, stream);
  return out;
}

Tensor Tensor::to(Device device, Stream& stream) const {
  if (device == this->device()) return *this;
  Tensor src = contiguous(stream);
  Tensor out = empty(shape_, dtype_, device);
  out.copy_from(src, stream);
  return out;
}

void Tensor::copy_from(const Tensor& src, Stream& stream) {
  MRMF_CHECK_KIND(Shape, src.shape() == shape_, "copy_from: shape ", src.shape().str(), " into ", shape_.str());
  MRMF_CHECK_KIND(Shape, src.dtype() == dtype_, "copy_from: dtype ", dtype_name(src.dtype()), " into ",
                  dtype_name(dtype_));
  if (is_contiguous() && src.is_contiguous()) {
    copy_bytes(raw_data(), memory_kind(), src.raw_data(), src.memory_kind(), nbytes(), stream.native());
    return;
  }
  MRMF_CHECK_KIND(Device, src.device() == device(), "copy_from: a strided copy between ", src.device().str(), " and ",
                  device().str(), " needs a contiguous source and destination");
  kernels::strided_copy(*this, src, stream);
}

void Tensor::zero_(Stream& stream) {
  MRMF_CHECK_KIND(Shape, is_contiguous(), "zero_ on a non-contiguous tensor");
  zero_bytes(raw_data(), memory_kind(), nbytes(), stream.native());
}

void Tensor::fill_(float value) {
  MRMF_CHECK_KIND(Device, !device().is_cuda(), "fill_ is host-only; ", str());
  MRMF_CHECK_KIND(Shape, is_contiguous(), "fill_ on a non-contiguous tensor");
  float* p = data<float>();
  for (int64_t i = 0; i < numel(); ++i) p[i] = value;
}

int64_t Tensor::linear_offset(std::initializer_list<int64_t> idx) const {
  MRMF_CHECK_KIND(Shape, static_cast<int>(idx.size()) == ndim(), "at: ", idx.size(), " indices for ", str());
  int64_t off = 0;
  int i = 0;
  for (int64_t v : idx) {
    MRMF_CHECK_KIND(Shape, v >= 0 && v < shape_[i], "at: index ", v, " out of range in dimension ", i, " of ", str());
    off += v * strides_[static_cast<size_t>(i++)];
  }
  return off;
}

float Tensor::at(std::initializer_list<int64_t> idx) const {
  MRMF_CHECK_KIND(Device, !device().is_cuda(), "at() is host-only; ", str());
  return data<float>()[linear_offset(idx)];
}

float& Tensor::at(std::initializer_list<int64_t> idx) {
  MRMF_CHECK_KIND(Device, !device().is_cuda(), "at() is host-only; ", str());
  return data<float>()[linear_offset(idx)];
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << "Tensor" << shape_.str() << " " << dtype_name(dtype_) << " " << device().str();
  return os.str();
}

}  // namespace mrmf
