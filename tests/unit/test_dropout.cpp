// Dropout: keep rate, scaling, mask identity for (seed, step, layer), eval
// identity, backward through the recomputed mask, thread-count independence.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/dropout.h"
#include "kernels/dropout_ops.h"
#include "layers/dropout.h"
#include "support/finite_diff.h"

using namespace mrmf;

namespace {
struct DropModel {
  Model m;
  Dropout* a;
  Dropout* b;
  explicit DropModel(float p) : m("t", Shape{64, 100}) {
    a = &m.net().add("drop1", std::make_unique<Dropout>(p), ParamGroup::Top);
    b = &m.net().add("drop2", std::make_unique<Dropout>(p), ParamGroup::Top);
    m.build(Device::cpu(), 1);
  }
};
Tensor ones(const Shape& s) { return Tensor::full(s, 1.f); }
bool same(const Tensor& a, const Tensor& b) { return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0; }
}  // namespace

TEST_CASE("dropout: block evaluation matches philox_uniform lane by lane", "[dropout]") {
  for (uint64_t b : {0ull, 1ull, 12345ull, (1ull << 33) + 7}) {
    const auto r = kernels::dropout_block(99, 1234567, b);
    for (int l = 0; l < 4; ++l)
      REQUIRE(kernels::uint_to_unit_float(r.v[l]) == kernels::philox_uniform(99, 1234567, 4 * b + l));
  }
}

TEST_CASE("dropout: keep rate is 1 - p and kept values are scaled by 1 / (1 - p)", "[dropout]") {
  for (float p : {0.1f, 0.5f, 0.8f}) {
    DropModel t(p);
    Context ctx(Device::cpu(), ContextOptions{false, size_t(1) << 20, 7});
    const Tensor x = ones({64, 64, 100});
    const Tensor y = t.a->forward(ctx, x);
    double kept = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const float v = y.data<float>()[i];
      REQUIRE((v == 0.f || v == Approx(1.f / (1.f - p)).epsilon(1e-6)));
      kept += v != 0.f;
    }
    const double rate = kept / double(y.numel());
    REQUIRE(rate == Approx(1.0 - p).margin(0.01));
    // The mean of the output stays ~1 (inverted dropout).
    REQUIRE(rate / (1.0 - p) == Approx(1.0).margin(0.02));
  }
}

TEST_CASE("dropout: same mask for the same (seed, step, layer), different otherwise", "[dropout]") {
  DropModel t(0.5f);
  REQUIRE(t.a->layer_id() != t.b->layer_id());
  REQUIRE(t.a->layer_id() == dropout_layer_id("drop1."));
  const Tensor x = test::random_tensor({4, 64, 100}, 3);
  Context c1(Device::cpu(), ContextOptions{false, size_t(1) << 20, 42});
  Context c2(Device::cpu(), ContextOptions{false, size_t(1) << 20, 42});
  Context c3(Device::cpu(), ContextOptions{false, size_t(1) << 20, 43});
  const Tensor y1 = t.a->forward(c1, x);
  REQUIRE(same(y1, t.a->forward(c2, x)));     // same seed and step
  REQUIRE(!same(y1, t.b->forward(c1, x)));    // other layer
  REQUIRE(!same(y1, t.a->forward(c3, x)));    // other seed
  REQUIRE(c1.step() == 0);                    // the layer never advances the step
  c1.advance_step();
  REQUIRE(!same(y1, t.a->forward(c1, x)));    // other step
  c1.set_step(0);
  REQUIRE(same(y1, t.a->forward(c1, x)));     // back to step 0
}

TEST_CASE("dropout: backward reuses the forward mask, eval mode is the identity", "[dropout]") {
  DropModel t(0.3f);
  Context ctx(Device::cpu(), ContextOptions{false, size_t(1) << 20, 5});
  ctx.set_step(17);
  const Tensor x = ones({2, 64, 100});
  const Tensor y = t.a->forward(ctx, x);
  ctx.advance_step();  // the trainer may move on before backward: the mask is still the forward's
  const Tensor dy = test::random_tensor(x.shape(), 9);
  const Tensor dx = t.a->backward(ctx, dy, true);
  for (int64_t i = 0; i < x.numel(); ++i)
    REQUIRE(dx.data<float>()[i] == (y.data<float>()[i] == 0.f ? 0.f : dy.data<float>()[i] * (1.f / 0.7f)));

  ctx.set_training(false);
  const Tensor ye = t.a->forward(ctx, x);
  REQUIRE(ye.shares_storage_with(x));
  REQUIRE(t.a->backward(ctx, dy, true).shares_storage_with(dy));

  // Finite differences (the mask is fixed for a given step).
  ctx.set_training(true);
  const auto rep = test::check_gradients(*t.a, ctx, test::random_tensor({2, 64, 100}, 4));
  REQUIRE(rep.checked > 10);
  REQUIRE(rep.input_err < 1e-2);
}

TEST_CASE("dropout: p = 0 and p = 1, the mask does not depend on the thread count", "[dropout]") {
  const Tensor x = test::random_tensor({100000}, 1);
  Tensor y = Tensor::empty(x.shape());
  kernels::dropout_apply(cpu_stream(), x, y, 1, 2, 0.f);
  REQUIRE(same(x, y));
  kernels::dropout_apply(cpu_stream(), x, y, 1, 2, 1.f);
  for (int64_t i = 0; i < y.numel(); ++i) REQUIRE(y.data<float>()[i] == 0.f);
  const int before = omp_get_max_threads();
  Tensor a = Tensor::empty(x.shape()), b = Tensor::empty(x.shape());
  omp_set_num_threads(1);
  kernels::dropout_apply(cpu_stream(), x, a, 3, 4, 0.5f);
  omp_set_num_threads(2);
  kernels::dropout_apply(cpu_stream(), x, b, 3, 4, 0.5f);
  omp_set_num_threads(before);
  REQUIRE(same(a, b));
  REQUIRE_THROWS_AS(Dropout(1.5f), Error);
}
