#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "optim/lr_schedule.h"

using namespace mrmf;

TEST_CASE("lr schedule: Neuron Inverter linear warmup over epochs", "[lr_schedule]") {
  const double lr = 2e-3;
  LinearWarmup s(5, ScheduleUnit::Epoch, std::make_unique<ConstantLr>(lr));
  for (int64_t e = 0; e < 5; ++e) REQUIRE(s.lr(e, 1000 * e) == Approx(lr * double(e + 1) / 5.0));
  REQUIRE(s.lr(5, 0) == lr);
  REQUIRE(s.lr(50, 123456) == lr);
  // Warmup over steps instead.
  LinearWarmup st(100, ScheduleUnit::Step, std::make_unique<ConstantLr>(1.0));
  REQUIRE(st.lr(0, 0) == Approx(0.01));
  REQUIRE(st.lr(0, 49) == Approx(0.5));
  REQUIRE(st.lr(3, 100) == 1.0);
  // Zero-length warmup is the inner schedule.
  REQUIRE(LinearWarmup(0, ScheduleUnit::Epoch, std::make_unique<ConstantLr>(0.3)).lr(0, 0) == 0.3);
}

TEST_CASE("lr schedule: CosmoFlow piecewise-constant decay (TF boundary convention)", "[lr_schedule]") {
  PiecewiseConstant s({1600, 2400}, {8e-4, 8e-5, 8e-6});
  REQUIRE(s.lr(0, 0) == 8e-4);
  REQUIRE(s.lr(0, 1599) == 8e-4);
  REQUIRE(s.lr(0, 1600) == 8e-4);  // x <= boundary keeps the earlier value
  REQUIRE(s.lr(0, 1601) == 8e-5);
  REQUIRE(s.lr(0, 2400) == 8e-5);
  REQUIRE(s.lr(0, 2401) == 8e-6);
  REQUIRE(s.lr(99, 1000000) == 8e-6);
  PiecewiseConstant ep({10}, {1.0, 0.5}, ScheduleUnit::Epoch);
  REQUIRE(ep.lr(10, 999999) == 1.0);
  REQUIRE(ep.lr(11, 0) == 0.5);
  REQUIRE_THROWS_WITH(PiecewiseConstant({1, 2}, {1.0, 2.0}), Catch::Contains("2 boundaries need 3 values"));
  REQUIRE_THROWS_WITH(PiecewiseConstant({5, 5}, {1.0, 2.0, 3.0}), Catch::Contains("must increase"));
}

TEST_CASE("lr schedule: polynomial and cosine decay", "[lr_schedule]") {
  PolynomialDecay poly(1e-2, 1e-4, 1000, 2.0);
  for (int64_t t : {0, 1, 250, 999, 1000, 5000}) {
    const double c = double(std::min<int64_t>(t, 1000));
    REQUIRE(poly.lr(0, t) == Approx((1e-2 - 1e-4) * std::pow(1 - c / 1000, 2.0) + 1e-4));
  }
  REQUIRE(poly.lr(0, 1000) == Approx(1e-4));
  PolynomialDecay lin(1.0, 0.0, 10, 1.0, ScheduleUnit::Epoch);
  REQUIRE(lin.lr(3, 777) == Approx(0.7));

  CosineDecay cosd(0.1, 200, 0.05);
  const double pi = std::acos(-1.0);
  for (int64_t t : {0, 1, 50, 100, 199, 200, 1000}) {
    const double c = double(std::min<int64_t>(t, 200));
    REQUIRE(cosd.lr(0, t) == Approx(0.1 * (0.95 * 0.5 * (1 + std::cos(pi * c / 200)) + 0.05)));
  }
  REQUIRE(cosd.lr(0, 0) == Approx(0.1));
  REQUIRE(cosd.lr(0, 100) == Approx(0.1 * (0.95 * 0.5 + 0.05)));
  REQUIRE(cosd.lr(0, 200) == Approx(0.005));
  REQUIRE_THROWS_AS(CosineDecay(0.1, 0), Error);
}

TEST_CASE("lr schedule: ReduceLROnPlateau follows torch (patience, threshold, cooldown, min_lr)", "[lr_schedule]") {
  PlateauOptions o;
  o.factor = 0.5;
  o.patience = 2;
  o.cooldown = 1;
  o.min_lr = 0.2;
  ReduceLROnPlateau s(1.0, o);
  REQUIRE(s.lr(0, 0) == 1.0);
  // Sequence traced by hand with torch's algorithm:
  //  metric  better?  bad  cooldown  reduce -> lr
  REQUIRE_FALSE(s.step(10.0));    // yes      0    0                  1.0
  REQUIRE_FALSE(s.step(9.9995));  // no (rel threshold: needs < 9.999) 1
  REQUIRE_FALSE(s.step(10.0));    // no       2
  REQUIRE(s.step(10.0));          // no       3 > 2 -> reduce, cooldown 1     0.5
  REQUIRE(s.lr(4, 0) == 0.5);
  REQUIRE(s.num_bad_epochs() == 0);
  REQUIRE(s.cooldown_counter() == 1);
  REQUIRE_FALSE(s.step(11.0));    // no, in cooldown: bad reset to 0, cooldown 0
  REQUIRE(s.num_bad_epochs() == 0);
  REQUIRE_FALSE(s.step(11.0));    // bad 1
  REQUIRE_FALSE(s.step(11.0));    // bad 2
  REQUIRE(s.step(11.0));          // bad 3 -> 0.25
  REQUIRE(s.lr(8, 0) == Approx(0.25));
  REQUIRE_FALSE(s.step(9.0));     // better: best 9, cooldown 1 -> 0
  REQUIRE(s.best() == 9.0);
  REQUIRE_FALSE(s.step(9.0));
  REQUIRE_FALSE(s.step(9.0));
  REQUIRE(s.step(9.0));           // 0.25 * 0.5 = 0.125 -> clamped to min_lr 0.2
  REQUIRE(s.lr(12, 0) == Approx(0.2));
  REQUIRE_FALSE(s.step(9.0));     // cooldown
  REQUIRE_FALSE(s.step(9.0));
  REQUIRE_FALSE(s.step(9.0));
  REQUIRE_FALSE(s.step(9.0));     // would reduce, but already at min_lr: torch's eps test skips it
  REQUIRE(s.lr(16, 0) == Approx(0.2));
  REQUIRE(s.num_reductions() == 3);
}

TEST_CASE("lr schedule: plateau in max mode and absolute threshold", "[lr_schedule]") {
  PlateauOptions o;
  o.mode = PlateauOptions::Mode::Max;
  o.threshold_mode = PlateauOptions::ThresholdMode::Abs;
  o.threshold = 0.1;
  o.patience = 0;
  o.factor = 0.1;
  ReduceLROnPlateau s(1.0, o);
  REQUIRE_FALSE(s.step(0.5));  // first metric is always better than -inf
  REQUIRE_FALSE(s.step(0.61)); // 0.61 > 0.5 + 0.1: better
  REQUIRE(s.best() == 0.61);
  REQUIRE(s.step(0.7));        // 0.7 < 0.71: not better, patience 0 -> reduce at once
  REQUIRE(s.lr(3, 0) == Approx(0.1));
  REQUIRE(s.step(std::numeric_limits<double>::quiet_NaN()));  // NaN is never better
  REQUIRE(s.lr(4, 0) == Approx(0.01));
}

TEST_CASE("lr schedule: warmup over plateau, state save and restore", "[lr_schedule]") {
  PlateauOptions o;
  o.patience = 1;
  o.factor = 0.5;
  auto make = [&] {
    return std::make_unique<LinearWarmup>(3, ScheduleUnit::Epoch, std::make_unique<ReduceLROnPlateau>(0.01, o));
  };
  auto a = make();
  REQUIRE(a->lr(0, 0) == Approx(0.01 / 3));
  for (double m : {1.0, 2.0, 2.0}) a->on_epoch_end(m);  // one reduction at the third epoch end
  REQUIRE(a->lr(3, 0) == Approx(0.005));
  a->on_epoch_end(0.5);
  const ScheduleState st = a->state();
  REQUIRE(st.at("inner.best") == 0.5);
  REQUIRE(st.at("inner.num_reductions") == 1);
  REQUIRE(st.at("inner.last_epoch") == 4);

  auto b = make();
  b->load_state(st);
  REQUIRE(b->state() == st);
  REQUIRE(b->lr(4, 0) == a->lr(4, 0));
  // Both continue identically.
  for (double m : {0.6, 0.7, 0.4, 0.4, 0.4}) {
    a->on_epoch_end(m);
    b->on_epoch_end(m);
    REQUIRE(b->lr(9, 0) == a->lr(9, 0));
  }
  REQUIRE(b->state() == a->state());
  ScheduleState bad = st;
  bad.erase("inner.scale");
  REQUIRE_THROWS_WITH(make()->load_state(bad), Catch::Contains("'scale'"));
  // Stateless schedules have an empty state.
  REQUIRE(CosineDecay(0.1, 10).state().empty());
  REQUIRE_FALSE(a->describe().empty());
}
