#include <catch2/catch.hpp>

#include "core/tensor.h"

using namespace mrmf;

TEST_CASE("tensor: 64-byte aligned contiguous allocation", "[core]") {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n});
    REQUIRE(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
    REQUIRE(t.is_contiguous());
    REQUIRE(t.nbytes() == static_cast<size_t>(n) * 4);
  }
}

TEST_CASE("tensor: view and reshape share storage", "[core]") {
  Tensor t = Tensor::empty({2, 3, 4});
  for (int64_t i = 0; i < 24; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor v = t.view({6, -1});
  REQUIRE(v.shape() == Shape{6, 4});
  REQUIRE(v.shares_storage_with(t));
  v.at({5, 3}) = -1.f;
  REQUIRE(t.at({1, 2, 3}) == -1.f);
  REQUIRE_THROWS_WITH(t.view({5, 5}), Catch::Contains("[5, 5]") && Catch::Contains("24"));
  REQUIRE_THROWS_WITH(t.view({-1, -1}), Catch::Contains("only one dimension"));
}

TEST_CASE("tensor: transpose is a view, contiguous() copies in the new order", "[core]") {
  Tensor t = Tensor::empty({2, 5, 3});  // (N, T, C)
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor tr = t.transpose(1, 2);  // (N, C, T)
  REQUIRE_FALSE(tr.is_contiguous());
  REQUIRE_THROWS_WITH(tr.view({-1}), Catch::Contains("non-contiguous"));
  Tensor c = tr.contiguous();
  REQUIRE(c.is_contiguous());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t tt = 0; tt < 5; ++tt) REQUIRE(c.at({n, ch, tt}) == t.at({n, tt, ch}));
}

TEST_CASE("tensor: narrow offsets into the same storage", "[core]") {
  Tensor t = Tensor::full({4, 3}, 0.f);
  Tensor rows = t.narrow(0, 1, 2);
  REQUIRE(rows.is_contiguous());
  rows.fill_(2.f);
  REQUIRE(t.at({0, 0}) == 0.f);
  REQUIRE(t.at({1, 0}) == 2.f);
  REQUIRE(t.at({2, 2}) == 2.f);
  REQUIRE(t.at({3, 0}) == 0.f);
  REQUIRE_THROWS_WITH(t.narrow(0, 3, 2), Catch::Contains("out of range"));
}

TEST_CASE("tensor: typed access checks the element type", "[core]") {
  Tensor t = Tensor::empty({4}, DType::U16);
  REQUIRE_NOTHROW(t.data<uint16_t>());
  REQUIRE_THROWS_WITH(t.data<float>(), Catch::Contains("uint16") && Catch::Contains("float32"));
}

TEST_CASE("tensor: shapes beyond five dimensions are refused", "[core]") {
  REQUIRE_THROWS_WITH((Shape{1, 2, 3, 4, 5, 6}), Catch::Contains("at most 5"));
}

TEST_CASE("tensor: copy to a CUDA device without CUDA fails cleanly", "[core]") {
  if (built_with_cuda() && cuda_device_count() > 0) return;  // only meaningful without a GPU
  Tensor t = Tensor::full({3}, 1.f);
  REQUIRE_THROWS_AS(t.to(Device::cuda(0)), Error);
}
