// Tensor: a typed, strided view into shared storage on one device.
//
// Views (view/reshape of contiguous tensors, narrow, transpose) share storage
// and never copy; data moves between devices only through explicit copies
// (`to`, `copy_from`). Storage is reference counted so a parameter view keeps
// its model's flat buffer alive.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/shape.h"
#include "core/stream.h"

namespace mrmf {

// Owns one allocation. Move-only; frees through the allocator that made it.
class Storage {
 public:
  Storage(size_t bytes, Device device, bool pinned = false);
  // Wraps memory owned elsewhere (no free).
  Storage(void* external, size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemoryKind kind() const { return kind_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  MemoryKind kind_ = MemoryKind::Cpu;
  bool owned_ = true;
};

using Strides = std::array<int64_t, kMaxDims>;

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(), bool pinned = false);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      Stream& stream = cpu_stream());
  // CPU tensor filled with `value` (float32).
  static Tensor full(const Shape& shape, float value);
  // A non-owning tensor over external memory (e.g. an HDF5 read buffer).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t size(int dim) const { return shape_[dim]; }
  int ndim() const { return shape_.ndim(); }
  int64_t numel() const { return shape_.numel(); }
  int64_t stride(int dim) const { return strides_[static_cast<size_t>(dim < 0 ? dim + ndim() : dim)]; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  int64_t offset() const { return offset_; }
  bool is_contiguous() const;
  bool is_pinned() const { return storage_ && storage_->kind() == MemoryKind::Pinned; }
  MemoryKind memory_kind() const { return storage_ ? storage_->kind() : MemoryKind::Cpu; }
  bool shares_storage_with(const Tensor& o) const { return storage_ && storage_ == o.storage_; }
  // Tensors (views included) holding this storage; 1: this one alone (a
  // loader reusing its own buffers hands out only those nobody else holds).
  long storage_holders() const { return storage_.use_count(); }

  // Raw pointer to the first element; checks the element type.
  template <class T>
  T* data() const {
    MRMF_CHECK_KIND(Shape, dtype_of<T>::value == dtype_, "tensor holds ", dtype_name(dtype_), ", accessed as ",
                    dtype_name(dtype_of<T>::value));
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // ---- views (no copy) ----
  // New shape with the same number of elements; one dimension may be -1.
  // Requires a contiguous tensor (it never copies; call contiguous() first).
  Tensor view(std::initializer_list<int64_t> dims) const;
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const { return view(shape); }
  Tensor flatten_from(int dim) const;             // [N, C, L] -> [N, C*L] for dim=1
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor transpose(int a, int b) const;           // swaps strides, no copy
  Tensor flat() const { return view({numel()}); }

  // ---- copies ----
  Tensor contiguous(Stream& stream = cpu_stream()) const;
  Tensor clone(Stream& stream = cpu_stream()) const;
  Tensor to(Device device, Stream& stream = cpu_stream()) const;
  // Copies `src` (same shape and dtype, any device) into this tensor.
  void copy_from(const Tensor& src, Stream& stream = cpu_stream());
  void zero_(Stream& stream = cpu_stream());
  // CPU only: fills with a value.
  void fill_(float value);

  // CPU element access for tests and small host-side code.
  float at(std::initializer_list<int64_t> idx) const;
  float& at(std::initializer_list<int64_t> idx);

  std::string str() const;  // "Tensor[2, 3] f32 cpu"

 private:
  Tensor view_dims(std::vector<int64_t> dims) const;
  int64_t linear_offset(std::initializer_list<int64_t> idx) const;
  static Strides contiguous_strides(const Shape& s);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  Strides strides_{};
  DType dtype_ = DType::F32;
};

}  // namespace mrmf
