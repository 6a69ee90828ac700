// MRT with a resampled top (experiment.mrt_top: resample): the linear
// resampling against hand-computed values, the feature maps' centres from
// the layers' geometry, and the transfer itself -- bottom and equal-shaped
// top entries copied bit for bit, the flattened-feature-sized ones
// resampled at matching centres (weights scaled, vectors not), on the
// Neuron Inverter (one axis) and CosmoFlow (one of three axes halved) models.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "core/error.h"
#include "fusion/experiment_config.h"
#include "fusion/fuse.h"
#include "fusion/resample_top.h"
#include "layers/activation.h"

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
// Both maps' centres spread over the same extent, target d at source
// (d + 0.5) * from / to - 0.5: MRT's resampling before session 53, and the
// simplest positions to check the interpolation with.
std::vector<CentreMap> same_extent_positions(const Shape& from, const Shape& to) {
  std::vector<CentreMap> at;
  for (int a = 1; a < std::min(from.ndim(), to.ndim()); ++a) {
    const double r = double(from[a]) / double(to[a]);
    at.push_back({r, 0.5 * r - 0.5});
  }
  return at;
}
// Resampled at the positions `at`, or by default over the same extent.
std::vector<float> resampled(const std::vector<float>& x, const Shape& from, const Shape& to, int64_t outer,
                             float scale, std::vector<CentreMap> at = {}) {
  std::vector<float> y(static_cast<size_t>(outer * to.numel()));
  resample_positions(x.data(), from, y.data(), to, outer, scale, at.empty() ? same_extent_positions(from, to) : at);
  return y;
}
// The first index where a and b differ, -1 when they are equal: a failure
// names one value instead of printing millions.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::min(a.size(), b.size()));
  const auto m = std::mismatch(a.begin(), a.end(), b.begin());
  return m.first == a.end() ? -1 : m.first - a.begin();
}
bool same_maps(const std::vector<CentreMap>& a, const std::vector<CentreMap>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].scale != b[i].scale || a[i].offset != b[i].offset) return false;
  return true;
}
// A layer that keeps the shape and was never taught its geometry.
class Untaught : public Module {
 public:
  std::string type() const override { return "Untaught"; }
  Shape output_shape(const Shape& in) const override { return in; }
  Tensor forward(Context&, const Tensor& x) override { return x; }
  Tensor backward(Context&, const Tensor& dy, bool) override { return dy; }
};
// Neuron Inverter's map of flattened positions at T = 1600: each block is a
// conv (k = 4, no padding: i -> i + 1.5) and a pool (k = s = 4: i -> 4 i + 1.5),
// i -> 4 i + 3 together; three blocks: i -> 64 i + 63. At T = 800 a coarse
// input element j stands for original elements 2 j and 2 j + 1 (centre
// 2 j + 0.5), so coarse position x lies at 128 x + 126.5: target d is
// taken at x = (64 d + 63 - 126.5) / 128 = d / 2 - 63.5 / 128.
const std::vector<CentreMap> kNiCentres{{64.0, 63.0}};
const std::vector<CentreMap> kNiMatch{{0.5, -63.5 / 128.0}};
// CosmoFlow's with the last axis halved (derived in the test below).
const std::vector<CentreMap> kCfMatch{{1, 0}, {1, 0}, {0.5, -0.21875}};
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
  // Given positions: a ramp (value = source position) reads them back, clamped to [0, n - 1].
  const auto ramp = resampled({0, 1, 2, 3}, Shape{1, 4}, Shape{1, 8}, 1, 1.f, {{0.5, -0.75}});
  CHECK(ramp == std::vector<float>{0, 0, 0.25f, 0.75f, 1.25f, 1.75f, 2.25f, 2.75f});
  // Equal sizes but positions other than the identity: resampled, not copied.
  CHECK(resampled({0, 4}, Shape{1, 2}, Shape{1, 2}, 1, 1.f, {{1.0, 0.25}}) == std::vector<float>{1, 4});
  CHECK_THROWS_WITH(resampled({0, 1}, Shape{1, 2}, Shape{1, 4}, 1, 1.f, {{1, 0}, {1, 0}}),
                    Catch::Contains("2 position maps for the 1 spatial axes of [1, 2]"));
}

TEST_CASE("Feature-map centres from the layers' geometry, and the positions MRT matches", "[fusion][resample]") {
  // Neuron Inverter, unpadded: the map above, with the fused BN-act-pool layers and without.
  for (const char* fused : {"true", "false"}) {
    INFO("fused " << fused);
    ModelSpec s = spec("neuron_inverter", Shape{3, 1600});
    s.options["fused"] = fused;
    auto m = build_model(normalized(s));
    CHECK(same_maps(flattened_feature_centres(*m), kNiCentres));
  }
  auto coarse = build_model(spec("neuron_inverter", Shape{3, 800}));
  auto dense = build_model(spec("neuron_inverter", Shape{3, 1600}));
  CHECK(same_maps(matching_positions(*coarse, *dense), kNiMatch));
  // Not the same-extent positions (d + 0.5) * 11 / 24 - 0.5: up to ~0.7 apart.
  CHECK(!same_maps(kNiMatch, same_extent_positions(Shape{180, 11}, Shape{180, 24})));
  // The ramp of the 11 coarse positions read at the 24 target ones: d / 2 - 0.49609375, clamped.
  std::vector<float> r(11);
  for (int i = 0; i < 11; ++i) r[static_cast<size_t>(i)] = float(i);
  const auto at = resampled(r, Shape{1, 11}, Shape{1, 24}, 1, 1.f, matching_positions(*coarse, *dense));
  CHECK(at[0] == 0.f);
  CHECK(at[1] == 0.00390625f);
  CHECK(at[12] == 5.50390625f);
  CHECK(at[21] == 10.f);  // 10.004, past the last coarse centre
  CHECK(at[23] == 10.f);
  // CosmoFlow, every axis alike: conv4 (k = 3, pad 1, stride 2: i -> 2 i)
  // among the pools and padded stride-1 convs gives i -> 64 i + 27.5, not
  // the same-extent 64 i + 31.5. Halving the last axis: coarse position x
  // lies at 2 (64 x + 27.5) + 0.5, so target d is taken at d / 2 - 0.21875
  // (same extent: d / 2 - 0.25); the other axes keep the identity.
  auto cf_coarse = build_model(spec("cosmoflow", Shape{4, 128, 128, 64}));
  auto cf = build_model(spec("cosmoflow", Shape{4, 128, 128, 128}));
  CHECK(same_maps(flattened_feature_centres(*cf), {{64, 27.5}, {64, 27.5}, {64, 27.5}}));
  CHECK(same_maps(matching_positions(*cf_coarse, *cf), kCfMatch));
  // Inputs that are no whole multiple of each other, and a layer that does not say.
  CHECK_THROWS_WITH(matching_positions(*build_model(spec("neuron_inverter", Shape{3, 700})), *dense),
                    Catch::Contains("[3, 1600] is not a whole multiple of the coarse model's [3, 700]"));
  Model odd("odd", Shape{2, 8});
  odd.net().add("mystery", std::make_unique<Untaught>(), ParamGroup::Bottom);
  odd.net().add("flatten", std::make_unique<Flatten>(), ParamGroup::Top);
  CHECK(flattened_feature_shape(odd) == Shape{2, 8});  // the shape alone needs no geometry
  CHECK_THROWS_WITH(flattened_feature_centres(odd),
                    Catch::Contains("layer 'mystery' (Untaught) does not say where its output positions lie"));
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
      CHECK(first_difference(got, resampled(src, Shape{180, 11}, Shape{180, 24}, 512, 11.f / 24.f, kNiMatch)) == -1);
      ++resampled_entries;
    } else if (e.name.rfind("flat_bn.", 0) == 0 && e.shape.ndim() == 1 && e.shape[0] == 180 * 24) {
      // Vectors: not scaled.
      CHECK(first_difference(got, resampled(src, Shape{180, 11}, Shape{180, 24}, 1, 1.f, kNiMatch)) == -1);
      ++resampled_entries;
    } else {
      CHECK(first_difference(got, src) == -1);  // the bottom, and the top's entries of equal shape (FC1's bias too)
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
      CHECK(first_difference(values(*t, e.name), values(*coarse, e.name)) == -1);
    } else {
      REQUIRE(e.shape.ndim() == 2);
      CHECK(first_difference(values(*t, e.name), resampled(values(*coarse, e.name), from, to, e.shape[0],
                                                           float(from.numel()) / float(to.numel()), kCfMatch)) == -1);
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
