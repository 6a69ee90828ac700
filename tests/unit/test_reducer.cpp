// Resolution reducer: direct block averages, one-axis reduction of 3-D
// inputs, the adjoint backward, finite differences, misuse messages.
#include <catch2/catch.hpp>

#include "kernels/reduce_resolution_ops.h"
#include "layers/reducer.h"
#include "support/finite_diff.h"
#include "support/reference_pool_bn.h"

using namespace mrmf;

TEST_CASE("reducer: forward matches a direct average", "[reducer]") {
  struct Case {
    Shape in;
    std::vector<int64_t> f;
    Shape out;
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 16}, {2}, Shape{2, 3, 8}},                     // time axis of [N, C, L]
      {Shape{2, 3, 17}, {4}, Shape{2, 3, 4}},                     // remainder dropped
      {Shape{1, 2, 4, 6, 8}, {2, 2, 2}, Shape{1, 2, 2, 3, 4}},    // x, y, z
      {Shape{1, 2, 4, 6, 8}, {1, 1, 2}, Shape{1, 2, 4, 6, 4}},    // one axis only
      {Shape{2, 1, 4, 6, 8}, {4, 1, 1}, Shape{2, 1, 1, 6, 8}},    // the other end
      {Shape{1, 2, 6, 9}, {3, 3}, Shape{1, 2, 2, 3}},             // 2-D
  };
  for (const auto& c : cases) {
    INFO(c.in.str());
    const Tensor x = test::random_tensor(c.in, 3);
    REQUIRE(kernels::reduce_resolution_shape(c.in, c.f, "t") == c.out);
    Tensor y = Tensor::empty(c.out);
    kernels::reduce_resolution_forward(cpu_stream(), x, y, c.f);
    REQUIRE(test::max_abs_diff(y, ref::reduce_resolution(x, c.f)) < 1e-6);

    // Backward is the adjoint: <dy, R x> == <R^T dy, x>.
    const Tensor dy = test::random_tensor(c.out, 4);
    Tensor dx = Tensor::full(c.in, 5.f);
    kernels::reduce_resolution_backward(cpu_stream(), dy, dx, c.f);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y.numel(); ++i) lhs += double(dy.data<float>()[i]) * y.data<float>()[i];
    for (int64_t i = 0; i < x.numel(); ++i) rhs += double(dx.data<float>()[i]) * x.data<float>()[i];
    REQUIRE(lhs == Approx(rhs).epsilon(1e-5));
  }
}

TEST_CASE("reducer: one axis of a 3-D volume leaves the others and the channels alone", "[reducer]") {
  Tensor x = Tensor::empty({1, 2, 2, 2, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i);
  Tensor y = Tensor::empty({1, 2, 2, 2, 2});
  kernels::reduce_resolution_forward(cpu_stream(), x, y, {1, 1, 2});
  for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.data<float>()[i] == Approx(2 * i + 0.5));
  Tensor dx = Tensor::empty(x.shape());
  kernels::reduce_resolution_backward(cpu_stream(), Tensor::full(y.shape(), 1.f), dx, {1, 1, 2});
  for (int64_t i = 0; i < dx.numel(); ++i) REQUIRE(dx.data<float>()[i] == 0.5f);
}

TEST_CASE("reducer layer: backward matches finite differences, misuse", "[reducer]") {
  Model m("t", Shape{2, 4, 4, 6});
  auto& red = m.net().add("reduce", std::make_unique<ResolutionReducer>(std::vector<int64_t>{2, 2, 3}),
                          ParamGroup::Bottom);
  m.build(Device::cpu(), 1);
  Context ctx(Device::cpu());
  REQUIRE(red.output_shape({3, 2, 4, 4, 6}) == Shape{3, 2, 2, 2, 2});
  const auto rep = test::check_gradients(red, ctx, test::random_tensor({3, 2, 4, 4, 6}, 8));
  REQUIRE(rep.checked > 10);
  REQUIRE(rep.input_err < 1e-2);

  try {
    red.forward(ctx, Tensor::full({1, 2, 4, 1, 6}, 0.f));
    FAIL("expected a Shape error");
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::Shape);
    REQUIRE_THAT(e.what(), Catch::Contains("ResolutionReducer 'reduce'") && Catch::Contains("size 1 < factor 2"));
  }
  REQUIRE_THROWS_WITH(red.forward(ctx, Tensor::full({1, 2, 8}, 0.f)),
                      Catch::Contains("3 factor(s)") && Catch::Contains("[1, 2, 8]"));
  REQUIRE_THROWS_AS(ResolutionReducer({0}), Error);
  REQUIRE_THROWS_AS(ResolutionReducer({2, 2, 2, 2}), Error);
}
