// Shape: up to 5 dimensions stored inline (no heap), which covers NCDHW
// activations and [out, in, kd, kh, kw] Conv3d weights.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"

namespace mrmf {

constexpr int kMaxDims = 5;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return d_[static_cast<size_t>(i < 0 ? i + ndim_ : i)]; }
  int64_t& operator[](int i) { return d_[static_cast<size_t>(i < 0 ? i + ndim_ : i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= d_[i];
    return n;
  }
  // Elements per index of dimension dim - 1 (the product of the dimensions
  // from `dim` on): a channel's inner size without dividing by the others,
  // which may be 0 (an empty batch).
  int64_t numel_from(int dim) const {
    int64_t n = 1;
    for (int i = dim; i < ndim_; ++i) n *= d_[i];
    return n;
  }
  std::vector<int64_t> vec() const { return {d_.begin(), d_.begin() + ndim_}; }
  std::string str() const;  // "[2, 3, 4]"
  bool operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (d_[i] != o.d_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  template <class It>
  void assign(It b, It e) {
    const auto n = static_cast<int>(e - b);
    MRMF_CHECK_KIND(Shape, n <= kMaxDims, "tensors have at most ", kMaxDims, " dimensions, got ", n);
    ndim_ = n;
    for (int i = 0; i < n; ++i, ++b) {
      MRMF_CHECK_KIND(Shape, *b >= 0, "negative dimension ", *b);
      d_[i] = *b;
    }
  }
  std::array<int64_t, kMaxDims> d_{};
  int ndim_ = 0;
};

}  // namespace mrmf
