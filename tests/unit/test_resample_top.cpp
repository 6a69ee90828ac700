// MRT with a resampled top (experiment.mrt_top: resample): the linear
// resampling against hand-computed values, and the transfer itself -- bottom
// and equal-shaped top entries copied bit for bit, the flattened-feature-
// sized ones resampled (weights scaled, vectors not), on the Neuron Inverter
// (one axis) and CosmoFlow (one of three axes halved) models.
#include <catch2/catch.hpp>
#include <vector>

#include "core/error.h"
#include "fusion/experiment_config.h"
#include "fusion/fuse.h"
#include "fusion/resample_top.h"

using namespace mrmf;

namespace {
ModelSpec spec(const char* name, Shape sample) {
  ModelSpec s;
  s.name = name;
  s.sample_shape = sample;
  return normalized(s);
}
std::unique_ptr<Model> built(const ModelSpec& s, uint64_t seed) {
  auto m = build_model(s);
  m->build(Device::cpu(), seed, default_init_scheme(s));
  Tensor b = m->params().buffers();  // recognisable running statistics
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 0.5f + 0.001f * static_cast<float>(i);
  return m;
}
std::vector<float> values(const Model& m, const std::string& name) {
  const Tensor t = m.params().value(m.params().at(name));
  return {t.data<float>(), t.data<float>() + t.numel()};
}
std::vector<float> resampled(const std::vector<float>& x, const Shape& from, const Shape& to, int64_t outer,
                             float scale) {
  std::vector<float> y(static_cast<size_t>(outer * to.numel()));
  resample_positions(x.data(), from, y.data(), to, outer, scale);
  return y;
}
}  // namespace

TEST_CASE("resample_positions: linear, centres aligned, clamped at the ends, one axis after another",
          "[fusion][resample]") {
  // 2 -> 4 positions: targets at source 0 (clamped from -0.25), 0.25, 0.75, 1 (clamped from 1.25).
  CHECK(resampled({1, 3}, Shape{1, 2}, Shape{1, 4}, 1, 1.f) == std::vector<float>{1, 1.5f, 2.5f, 3});
  // Two channels, two outer blocks, scaled: every block resampled alike.
  CHECK(resampled({1, 3, 10, 30, 2, 2, 0, 4}, Shape{2, 2}, Shape{2, 4}, 2, 0.5f) ==
        std::vector<float>{0.5f, 0.75f, 1.25f, 1.5f, 5, 7.5f, 12.5f, 15, 1, 1, 1, 1, 0, 0.5f, 1.5f, 2});
  // 2 -> 3: source positions 0 (clamped from -1/6), 0.5 and 1 (clamped from 7/6).
  CHECK(resampled({0, 6}, Shape{1, 2}, Shape{1, 3}, 1, 1.f) == std::vector<float>{0, 3, 6});
  // Equal sizes: a copy (times the scale).
  CHECK(resampled({1, 2, 3}, Shape{1, 3}, Shape{1, 3}, 1, 2.f) == std::vector<float>{2, 4, 6});
  // Two spatial axes, only the first resampled: each column alone.
  CHECK(resampled({1, 5, 3, 7}, Shape{1, 2, 2}, Shape{1, 4, 2}, 1, 1.f) ==
        std::vector<float>{1, 5, 1.5f, 5.5f, 2.5f, 6.5f, 3, 7});
  // Both axes: bilinear, a product of the 1-D weights (2x2 -> 4x4 of x + 10 y).
  const auto y = resampled({0, 1, 10, 11}, Shape{1, 2, 2}, Shape{1, 4, 4}, 1, 1.f);
  const float at[4] = {0, 0.25f, 0.75f, 1};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) CHECK(y[static_cast<size_t>(i * 4 + j)] == Approx(10 * at[i] + at[j]));
  CHECK_THROWS_WITH(resampled({1, 2}, Shape{1, 2}, Shape{2, 1}, 1, 1.f), Catch::Contains("channel count"));
  CHECK_THROWS_WITH(resampled({0, 2, 4, 8}, Shape{1, 4}, Shape{1, 2}, 1, 1.f),
                    Catch::Contains("makes axis 1 coarser; only refining is supported"));
}

TEST_CASE("MRT with a resampled top: Neuron Inverter T = 800 -> 1600", "[fusion][resample]") {
  const ModelSpec cs = spec("neuron_inverter", Shape{3, 800}), ds = spec("neuron_inverter", Shape{3, 1600});
  auto coarse = built(cs, 3);
  REQUIRE(flattened_feature_shape(*coarse) == Shape{180, 11});  // the paper's Figure 1: 11 x 180
  auto t = transfer_resampled(*coarse, ds, Device::cpu(), 99);
  REQUIRE(flattened_feature_shape(*t) == Shape{180, 24});
  int resampled_entries = 0;
  for (const auto& e : t->params().entries()) {
    INFO(e.name);
    const auto got = values(*t, e.name), src = values(*coarse, e.name);
    if (e.name == "fc_block.0.weight") {  // [512, 180 x 11] -> [512, 180 x 24], scaled by 11 / 24
      CHECK(got == resampled(src, Shape{180, 11}, Shape{180, 24}, 512, 11.f / 24.f));
      ++resampled_entries;
    } else if (e.name.rfind("flat_bn.", 0) == 0 && e.shape.ndim() == 1 && e.shape[0] == 180 * 24) {
      CHECK(got == resampled(src, Shape{180, 11}, Shape{180, 24}, 1, 1.f));  // vectors: not scaled
      ++resampled_entries;
    } else {
      CHECK(got == src);  // the bottom, and the top's entries of equal shape (FC1's bias too)
    }
  }
  CHECK(resampled_entries == 5);  // FC1's weight; the flat BN's weight, bias, mean and variance
}

TEST_CASE("MRT with a resampled top: CosmoFlow with one axis halved, and what cannot be resampled",
          "[fusion][resample]") {
  const ModelSpec cs = spec("cosmoflow", Shape{4, 128, 128, 64}), ds = spec("cosmoflow", Shape{4, 128, 128, 128});
  auto coarse = built(cs, 4);
  const Shape from = flattened_feature_shape(*coarse);
  auto t = transfer_resampled(*coarse, ds, Device::cpu(), 99);
  const Shape to = flattened_feature_shape(*t);
  REQUIRE(from.ndim() == 4);
  CHECK(from[1] == to[1]);
  CHECK(from[2] == to[2]);
  CHECK(from[3] < to[3]);  // only the halved axis differs
  int changed = 0;
  for (const auto& e : t->params().entries()) {
    INFO(e.name);
    const ParamInfo& s = coarse->params().info(coarse->params().at(e.name));
    if (s.shape == e.shape) {
      CHECK(values(*t, e.name) == values(*coarse, e.name));
    } else {
      REQUIRE(e.shape.ndim() == 2);
      CHECK(values(*t, e.name) ==
            resampled(values(*coarse, e.name), from, to, e.shape[0], float(from.numel()) / float(to.numel())));
      ++changed;
    }
  }
  CHECK(changed == 1);  // the first FC layer
}

TEST_CASE("MRT with a resampled top: a top entry that differs other than by the features is refused",
          "[fusion][resample]") {
  // The same conv bottom, a first FC layer of another width: not a resolution's difference.
  ModelSpec wide = spec("neuron_inverter", Shape{3, 1600});
  wide.options["fc"] = "256,32";
  auto coarse = built(spec("neuron_inverter", Shape{3, 800}), 3);
  CHECK_THROWS_WITH(transfer_resampled(*coarse, normalized(wide), Device::cpu(), 1),
                    Catch::Contains("'fc_block.0.weight' is [512, 1980] in the coarse model and [256, 4320] in the "
                                    "target; only entries sized by the flattened features ([180, 11] -> [180, 24]) "
                                    "can be resampled"));
}

TEST_CASE("experiment key mrt_top: fresh or resample", "[fusion][resample][config]") {
  const std::string base = "run: {}\nexperiment:\n  target_val_loss: 0.1\n";
  CHECK(parse_experiment_config(base, {}, "t.yaml").mrt_top == "fresh");
  CHECK(parse_experiment_config(base + "  mrt_top: resample\n", {}, "t.yaml").mrt_top == "resample");
  CHECK_THROWS_WITH(parse_experiment_config(base + "  mrt_top: interpolate\n", {}, "t.yaml"),
                    Catch::Contains("experiment key 'mrt_top': 'interpolate' is not one of fresh, resample"));
}
