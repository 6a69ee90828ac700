// Fixtures shared by the HDF5 format tests (test_formats.cpp, test_h5_chunks.cpp, test_h5_split_chunks.cpp,
// test_checkpoint_damage.cpp).
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "data/formats.h"

namespace mrmf::test::formats {

// A tensor of `s` in `dt` whose element i is offset + scale * (i % 997).
inline Tensor iota(const Shape& s, DType dt, float scale = 1.f, float offset = 0.f) {
  Tensor f = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = offset + scale * static_cast<float>(i % 997);
  return data::from_float32(f, dt);
}

// The message of the Data error `f` throws (fails the test if none or another kind).
template <class F>
inline std::string data_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    return e.what();
  }
  FAIL("expected an mrmf::Error of kind Data");
  return {};
}

}  // namespace mrmf::test::formats
