#include <catch2/catch.hpp>

#include "layers/param_store.h"

using namespace mrmf;

namespace {
// A toy "model" layout: a conv-like bottom and an FC top whose first layer
// depends on the resolution (flat size), as in the MRMF models.
ParamStore make_store(int64_t flat) {
  ParamStore s;
  s.add_param("conv1.weight", {4, 3, 2}, ParamGroup::Bottom);
  s.add_param("conv1.bias", {4}, ParamGroup::Bottom);
  s.add_buffer("bn.running_mean", {4}, ParamGroup::Bottom);
  s.add_param("fc1.weight", {5, flat}, ParamGroup::Top);
  s.add_param("fc1.bias", {5}, ParamGroup::Top);
  s.add_param("fc2.weight", {2, 5}, ParamGroup::Top);
  s.finalize(Device::cpu());
  return s;
}

void fill_ramp(const Tensor& t, float base) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = base + static_cast<float>(i);
}
}  // namespace

TEST_CASE("param store: one flat buffer, aligned named views", "[param_store]") {
  ParamStore s = make_store(8);
  REQUIRE(s.num_parameters() == 24 + 4 + 40 + 5 + 10);
  for (const auto& p : s.entries()) REQUIRE(p.offset % ParamStore::kAlign == 0);
  Tensor w = s.value(s.at("fc1.weight"));
  REQUIRE(w.shape() == Shape{5, 8});
  REQUIRE(w.shares_storage_with(s.values()));
  REQUIRE(s.grad(s.at("fc1.weight")).shares_storage_with(s.grads()));
  REQUIRE(s.value(s.at("bn.running_mean")).shares_storage_with(s.buffers()));
  REQUIRE_THROWS_WITH(s.grad(s.at("bn.running_mean")), Catch::Contains("buffer"));
  REQUIRE_THROWS_WITH(s.at("fc9.weight"), Catch::Contains("fc9.weight"));
  // Writing through a view lands in the flat buffer at the recorded offset.
  w.fill_(3.f);
  REQUIRE(s.values().data<float>()[s.info(s.at("fc1.weight")).offset] == 3.f);
}

TEST_CASE("param store: groups are contiguous ranges", "[param_store]") {
  ParamStore s = make_store(8);
  auto [b0, b1] = s.group_range(ParamGroup::Bottom);
  auto [t0, t1] = s.group_range(ParamGroup::Top);
  REQUIRE(b0 == 0);
  REQUIRE(b1 == t0);
  REQUIRE(t1 == s.num_param_elements());
  REQUIRE(s.names_in_group(ParamGroup::Bottom) ==
          std::vector<std::string>{"conv1.weight", "conv1.bias", "bn.running_mean"});
}

TEST_CASE("param store: group copy across resolutions copies exactly the bottom", "[param_store]") {
  ParamStore coarse = make_store(4), dense = make_store(8);
  fill_ramp(coarse.values(), 100.f);
  fill_ramp(coarse.buffers(), 500.f);
  fill_ramp(dense.values(), -100.f);
  fill_ramp(dense.buffers(), -500.f);
  Tensor dense_before = dense.values().clone();

  dense.copy_group_from(coarse, ParamGroup::Bottom);
  for (const auto& name : {"conv1.weight", "conv1.bias", "bn.running_mean"}) {
    Tensor a = dense.value(dense.at(name)), b = coarse.value(coarse.at(name));
    for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.data<float>()[i] == b.data<float>()[i]);
  }
  // Every top value untouched.
  auto [t0, t1] = dense.group_range(ParamGroup::Top);
  for (int64_t i = t0; i < t1; ++i) REQUIRE(dense.values().data<float>()[i] == dense_before.data<float>()[i]);
}

TEST_CASE("param store: copying mismatched blocks is refused, naming them, with nothing copied", "[param_store]") {
  ParamStore coarse = make_store(4), dense = make_store(8);
  fill_ramp(coarse.values(), 1.f);
  Tensor before = dense.values().clone();
  REQUIRE_THROWS_WITH(dense.copy_group_from(coarse, ParamGroup::Top),
                      Catch::Contains("fc1.weight") && Catch::Contains("[5, 4]") && Catch::Contains("[5, 8]"));
  REQUIRE_THROWS_WITH(dense.copy_from(coarse, {"fc2.weight", "nope"}), Catch::Contains("nope"));
  for (int64_t i = 0; i < before.numel(); ++i) REQUIRE(dense.values().data<float>()[i] == before.data<float>()[i]);
  // Shapes that agree in the top group (fc1's bias, fc2) copy: exactly those
  // values, nothing else.
  REQUIRE_NOTHROW(dense.copy_from(coarse, {"fc1.bias", "fc2.weight"}));
  std::vector<bool> copied(static_cast<size_t>(before.numel()), false);
  for (const auto& name : {"fc1.bias", "fc2.weight"}) {
    const Tensor a = dense.value(dense.at(name)), b = coarse.value(coarse.at(name));
    REQUIRE(a.numel() == b.numel());
    for (int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.data<float>()[i] == b.data<float>()[i]);
    const int64_t off = a.data<float>() - dense.values().data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) copied[static_cast<size_t>(off + i)] = true;
  }
  for (int64_t i = 0; i < before.numel(); ++i)
    if (!copied[static_cast<size_t>(i)]) REQUIRE(dense.values().data<float>()[i] == before.data<float>()[i]);
}

TEST_CASE("param store: layout hash tells layouts apart", "[param_store]") {
  ParamStore a = make_store(8), b = make_store(8), c = make_store(4);
  REQUIRE(a.layout_hash() == b.layout_hash());
  REQUIRE(a.layout_hash() != c.layout_hash());
}

TEST_CASE("param store: misuse", "[param_store]") {
  ParamStore s;
  s.add_param("w", {2}, ParamGroup::Top);
  REQUIRE_THROWS_WITH(s.add_param("w", {3}, ParamGroup::Top), Catch::Contains("registered twice"));
  s.finalize(Device::cpu());
  REQUIRE_THROWS_WITH(s.add_param("v", {3}, ParamGroup::Top), Catch::Contains("after the store was finalized"));
  REQUIRE_THROWS_WITH(parse_group("middle"), Catch::Contains("middle"));
}
