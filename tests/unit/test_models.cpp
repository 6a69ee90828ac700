// The application models: parameter counts, flat sizes across resolutions,
// parameter names and groups (what MRMF fusion relies on), forward/backward
// on small inputs, fused vs plain layers, the registry and the tanh head.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "kernels/elementwise_ops.h"
#include "models/cosmoflow.h"
#include "models/extra_layers.h"
#include "models/neuron_inverter.h"
#include "models/registry.h"
#include "support/finite_diff.h"

using namespace mrmf;

namespace {
NeuronInverterConfig ni(int64_t T) {
  NeuronInverterConfig c;
  c.time_bins = T;
  return c;
}

CosmoFlowConfig cf(const std::string& variant, int64_t d, int64_t h, int64_t w) {
  CosmoFlowConfig c;
  c.variant = variant;
  c.spatial = {d, h, w};
  return c;
}

Shape param_shape(const Model& m, const std::string& name) { return m.params().info(m.params().at(name)).shape; }

// Runs one training forward + backward; returns the output.
Tensor train_step(Model& m, int64_t batch, uint64_t seed) {
  Context ctx(Device::cpu());
  std::vector<int64_t> d{batch};
  for (int i = 0; i < m.sample_shape().ndim(); ++i) d.push_back(m.sample_shape()[i]);
  Tensor x = test::random_tensor(Shape(d), seed);
  Tensor y = m.forward(ctx, x);
  Tensor dy = test::random_tensor(y.shape(), seed + 1);
  m.backward(ctx, dy);
  return y;
}

bool all_finite(const Tensor& t) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

double grad_norm(const Model& m) {
  const Tensor g = m.params().grads();
  double s = 0;
  for (int64_t i = 0; i < g.numel(); ++i) s += double(g.data<float>()[i]) * g.data<float>()[i];
  return std::sqrt(s);
}
}  // namespace

// ------------------------------------------------------------ Neuron Inverter
TEST_CASE("model neuron inverter: parameter count names and flat sizes", "[model]") {
  REQUIRE(neuron_inverter_flat_size(ni(1600)) == 4320);
  REQUIRE(neuron_inverter_flat_size(ni(800)) == 1980);
  REQUIRE(neuron_inverter_flat_size(ni(400)) == 900);

  auto m = build_neuron_inverter(ni(1600));
  m->build(Device::cpu(), 1);
  REQUIRE(m->params().num_parameters() == 2989239);
  REQUIRE(m->sample_shape() == Shape{3, 1600});
  // The original's state_dict keys (nn.ModuleList indices).
  REQUIRE(param_shape(*m, "cnn_block.0.weight") == Shape{30, 3, 4});
  REQUIRE(param_shape(*m, "cnn_block.3.weight") == Shape{90, 30, 4});
  REQUIRE(param_shape(*m, "cnn_block.6.bias") == Shape{180});
  REQUIRE(param_shape(*m, "flat_bn.running_var") == Shape{4320});
  REQUIRE(param_shape(*m, "flat_bn.num_batches_tracked") == Shape{});
  REQUIRE(param_shape(*m, "fc_block.0.weight") == Shape{512, 4320});
  REQUIRE(param_shape(*m, "fc_block.12.weight") == Shape{128, 256});
  REQUIRE(param_shape(*m, "fc_block.15.weight") == Shape{19, 128});
  REQUIRE(m->output_shape(5) == Shape{5, 19});
  // Bottom = the three convolutions only; flat_bn is sized by the resolution -> top.
  REQUIRE(m->params().names_in_group(ParamGroup::Bottom) ==
          std::vector<std::string>{"cnn_block.0.weight", "cnn_block.0.bias", "cnn_block.3.weight", "cnn_block.3.bias",
                                   "cnn_block.6.weight", "cnn_block.6.bias"});
  REQUIRE(m->params().info(m->params().at("flat_bn.weight")).group == ParamGroup::Top);

  // Without dropout the original's ModuleList has no Dropout entries.
  auto c = ni(400);
  c.dropout = 0.f;
  auto m0 = build_neuron_inverter(c);
  m0->build(Device::cpu(), 1);
  REQUIRE(param_shape(*m0, "fc_block.10.weight") == Shape{19, 128});
  REQUIRE(m0->params().find("fc_block.15.weight") < 0);

  auto too_short = ni(60);
  REQUIRE_THROWS_WITH(build_neuron_inverter(too_short), Catch::Contains("T = 60"));
}

TEST_CASE("model neuron inverter: fusion copies the bottom across resolutions - the top refuses", "[model]") {
  auto coarse = build_neuron_inverter(ni(800));
  auto dense = build_neuron_inverter(ni(1600));
  coarse->build(Device::cpu(), 11);
  dense->build(Device::cpu(), 22);
  dense->params().copy_group_from(coarse->params(), ParamGroup::Bottom);
  for (const auto& n : dense->params().names_in_group(ParamGroup::Bottom)) {
    const Tensor a = dense->params().value(dense->params().at(n)), b = coarse->params().value(coarse->params().at(n));
    REQUIRE(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
  }
  // Exactly the resolution-dependent entries: flat_bn (4 tensors of size flat) and fc_block.0.weight.
  try {
    dense->params().copy_group_from(coarse->params(), ParamGroup::Top);
    FAIL("top copy across resolutions must fail");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    REQUIRE(e.kind() == ErrorKind::Shape);
    REQUIRE_THAT(msg, Catch::Contains("cannot copy 5 of"));
    for (const char* n : {"fc_block.0.weight", "flat_bn.weight", "flat_bn.bias", "flat_bn.running_mean",
                          "flat_bn.running_var"})
      REQUIRE_THAT(msg, Catch::Contains(std::string("'") + n + "'"));
    REQUIRE_THAT(msg, !Catch::Contains("fc_block.0.bias"));
    REQUIRE_THAT(msg, !Catch::Contains("fc_block.3.weight"));
  }
}

TEST_CASE("model neuron inverter: forward and backward - fused and plain blocks agree", "[model]") {
  auto c = ni(400);
  auto fused = build_neuron_inverter(c);
  c.fused = false;
  auto plain = build_neuron_inverter(c);
  fused->build(Device::cpu(), 5);
  plain->build(Device::cpu(), 5);
  REQUIRE(fused->params().layout_hash() == plain->params().layout_hash());
  const Tensor yf = train_step(*fused, 4, 100);
  const Tensor yp = train_step(*plain, 4, 100);
  REQUIRE(yf.shape() == Shape{4, 19});
  REQUIRE(all_finite(yf));
  REQUIRE(test::max_abs_diff(yf, yp) < 1e-5);
  REQUIRE(grad_norm(*fused) > 0);
  REQUIRE(test::max_rel_diff(fused->params().grads(), plain->params().grads(), 1e-3) < 1e-4);
  REQUIRE(test::max_abs_diff(fused->params().buffers(), plain->params().buffers()) < 1e-6);
}

// ------------------------------------------------------------ CosmoFlow
TEST_CASE("model cosmoflow: flat sizes and skipped pools for every variant", "[model]") {
  struct Case {
    const char* variant;
    int64_t d, h, w, flat;
    size_t skipped, reduced;
  };
  const Case cases[] = {
      {"mrmf", 128, 128, 128, 2048, 0, 0}, {"mrmf", 64, 64, 64, 256, 0, 0},   {"mrmf", 32, 32, 32, 256, 1, 0},
      {"mrmf", 16, 16, 16, 256, 2, 0},     {"mrmf", 32, 32, 16, 256, 1, 1},   {"lbann2019", 128, 128, 128, 2048, 0, 0},
      {"lbann2019", 64, 64, 64, 256, 0, 0}, {"lbann2019", 16, 16, 16, 256, 0, 0}, {"mlperf", 128, 128, 128, 32768, 0, 0},
      {"mlperf", 64, 64, 64, 4096, 0, 0},  {"mlperf", 32, 32, 32, 512, 0, 0}, {"mlperf", 16, 16, 16, 512, 1, 0},
  };
  for (const auto& k : cases) {
    INFO(k.variant << " " << k.d << "x" << k.h << "x" << k.w);
    CosmoFlowBuildInfo info;
    auto m = build_cosmoflow(cf(k.variant, k.d, k.h, k.w), &info);
    REQUIRE(info.flat == k.flat);
    REQUIRE(info.skipped_pools.size() == k.skipped);
    REQUIRE(info.reduced_pools.size() == k.reduced);
    REQUIRE(m->output_shape(2) == Shape{2, 4});
  }
  CosmoFlowBuildInfo info;
  build_cosmoflow(cf("mrmf", 16, 16, 16), &info);
  REQUIRE_THAT(info.skipped_pools[0], Catch::StartsWith("pool4"));
  REQUIRE_THAT(info.skipped_pools[1], Catch::StartsWith("pool5"));
  build_cosmoflow(cf("mrmf", 32, 32, 16), &info);
  REQUIRE_THAT(info.reduced_pools[0], Catch::Contains("pool4 (not over W"));
  REQUIRE_THROWS_WITH(build_cosmoflow(cf("resnet", 32, 32, 32)), Catch::Contains("unknown CosmoFlow variant"));
}

TEST_CASE("model cosmoflow mrmf: names counts and groups - fusion 64 to 128", "[model]") {
  auto dense = build_cosmoflow(cf("mrmf", 128, 128, 128));
  auto coarse = build_cosmoflow(cf("mrmf", 64, 64, 64));
  dense->build(Device::cpu(), 1, InitScheme::GlorotUniform);
  coarse->build(Device::cpu(), 2, InitScheme::GlorotUniform);
  const ParamStore& p = dense->params();
  REQUIRE(param_shape(*dense, "bn1.weight") == Shape{4});
  REQUIRE(param_shape(*dense, "conv1.weight") == Shape{16, 4, 3, 3, 3});
  REQUIRE(param_shape(*dense, "conv4.weight") == Shape{128, 64, 3, 3, 3});
  REQUIRE(param_shape(*dense, "bn8.running_mean") == Shape{256});
  REQUIRE(param_shape(*dense, "full1.weight") == Shape{2048, 2048});
  REQUIRE(param_shape(*dense, "full3.weight") == Shape{4, 256});
  int64_t bottom = 0, top = 0;
  for (const auto& e : p.entries())
    if (e.kind == ParamKind::Param) (e.group == ParamGroup::Bottom ? bottom : top) += e.numel();
  REQUIRE(bottom == 4718744);
  REQUIRE(top == 4721924);
  REQUIRE(p.num_parameters() == 9440668);
  REQUIRE(p.info(p.at("bn5.running_var")).group == ParamGroup::Bottom);
  REQUIRE(p.info(p.at("full1.bias")).group == ParamGroup::Top);

  dense->params().copy_group_from(coarse->params(), ParamGroup::Bottom);  // conv + BN incl. running stats
  try {
    dense->params().copy_group_from(coarse->params(), ParamGroup::Top);
    FAIL("top copy across resolutions must fail");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    REQUIRE_THAT(msg, Catch::Contains("cannot copy 1 of 6"));
    REQUIRE_THAT(msg, Catch::Contains("'full1.weight'"));
  }
}

TEST_CASE("model cosmoflow: every variant runs forward and backward at 16 cubed - fused equals plain", "[model]") {
  for (const char* v : {"mrmf", "lbann2019", "mlperf"}) {
    INFO(v);
    auto c = cf(v, 16, 16, 16);
    auto fused = build_cosmoflow(c);
    c.fused = false;
    auto plain = build_cosmoflow(c);
    fused->build(Device::cpu(), 9, InitScheme::GlorotUniform);
    plain->build(Device::cpu(), 9, InitScheme::GlorotUniform);
    REQUIRE(fused->params().layout_hash() == plain->params().layout_hash());
    const Tensor yf = train_step(*fused, 2, 300);
    const Tensor yp = train_step(*plain, 2, 300);
    REQUIRE(yf.shape() == Shape{2, 4});
    REQUIRE(all_finite(yf));
    REQUIRE(all_finite(fused->params().grads()));
    REQUIRE(grad_norm(*fused) > 0);
    REQUIRE(test::max_abs_diff(yf, yp) < 1e-4);
    REQUIRE(test::max_rel_diff(fused->params().grads(), plain->params().grads(), 1e-3) < 1e-3);
    if (std::string(v) == "mlperf")
      for (int64_t i = 0; i < yf.numel(); ++i) REQUIRE(std::fabs(yf.data<float>()[i]) < 1.2f);
    if (std::string(v) == "lbann2019") REQUIRE(fused->params().find("conv1.bias") < 0);  // no conv bias
  }
}

TEST_CASE("model cosmoflow: non-cubic input 32x32x16 runs", "[model]") {
  auto m = build_cosmoflow(cf("mrmf", 32, 32, 16));
  m->build(Device::cpu(), 3, InitScheme::GlorotUniform);
  REQUIRE(m->sample_shape() == Shape{4, 32, 32, 16});
  const Tensor y = train_step(*m, 2, 7);
  REQUIRE(y.shape() == Shape{2, 4});
  REQUIRE(all_finite(y));
}

// ------------------------------------------------------------ ScaledTanh
TEST_CASE("model scaled tanh: values and finite-difference gradient", "[model]") {
  Model m("tanh", Shape{6});
  m.net().add("out", std::make_unique<ScaledTanh>(1.2f), ParamGroup::Top);
  m.build(Device::cpu(), 0);
  Context ctx(Device::cpu());
  const Tensor x = test::random_tensor(Shape{3, 6}, 4, -2.f, 2.f);
  const Tensor y = m.forward(ctx, x);
  for (int64_t i = 0; i < x.numel(); ++i)
    REQUIRE(y.data<float>()[i] == Approx(1.2 * std::tanh(double(x.data<float>()[i]))).epsilon(1e-6));
  m.net().clear_saved();
  test::GradCheckOptions o;
  o.eps = 1e-3;
  o.tol = 1e-2;
  o.check_params = false;
  const auto r = test::check_gradients(m.net().child(0), ctx, x, o);
  INFO(r.worst);
  REQUIRE(r.checked > 0);
  REQUIRE(r.input_err < 1e-2);
}

// ------------------------------------------------------------ registry
TEST_CASE("model registry: specs options defaults and describe", "[model]") {
  ModelSpec s{"neuron_inverter", "", Shape{3, 1600}, {}};
  auto m = build_model(s);
  m->build(Device::cpu(), 1, default_init_scheme(s));
  REQUIRE(m->params().num_parameters() == 2989239);
  REQUIRE(default_init_scheme(s) == InitScheme::PyTorchDefault);
  const std::string table = describe(*m);
  INFO(table);
  REQUIRE_THAT(table, Catch::Contains("cnn_block.0"));
  REQUIRE_THAT(table, Catch::Contains("fc_block.15"));
  REQUIRE_THAT(table, Catch::Contains("total 2989239"));
  REQUIRE_THAT(table, Catch::Contains("bottom 76260"));

  s.options = {{"input_layout", "view"}, {"dropout", "0.1"}, {"fc", "64,32"}};
  const auto c = neuron_inverter_config(s);
  REQUIRE(c.input_layout == NiInputLayout::ReinterpretView);
  REQUIRE(c.fc_widths == std::vector<int64_t>{64, 32});
  REQUIRE(c.dropout == Approx(0.1f));
  s.options = {{"dropuot", "0.1"}};
  REQUIRE_THROWS_WITH(build_model(s), Catch::Contains("dropuot"));
  REQUIRE_THROWS_WITH(build_model(ModelSpec{"resnet", "", Shape{3, 32}, {}}), Catch::Contains("unknown model"));
  REQUIRE_THROWS_WITH(build_model(ModelSpec{"cosmoflow", "", Shape{4, 32, 32}, {}}), Catch::Contains("(C, D, H, W)"));

  ModelSpec cs{"cosmoflow", "", Shape{4, 16, 16, 16}, {{"fused", "false"}}};
  REQUIRE(normalized(cs).variant == "mrmf");
  REQUIRE(default_init_scheme(cs) == InitScheme::GlorotUniform);
  auto cm = build_model(cs);
  REQUIRE(cm->output_shape(1) == Shape{1, 4});
  // A given negative dropout silently meant the variant's default; an eps
  // beyond float32 became inf in BN (session 57).
  cs.options = {{"dropout", "-5"}};
  REQUIRE_THROWS_WITH(build_model(cs), Catch::Contains("model option 'dropout': -5 must be >= 0"));
  cs.options = {{"bn_eps", "1e39"}};
  REQUIRE_THROWS_WITH(build_model(cs), Catch::Contains("eps in (0, 3.4e38]"));
  cs.options = {{"fused", "false"}};
  REQUIRE_THAT(describe(*cm), Catch::Contains("pool3"));  // plain layers are listed by name

  REQUIRE(shape_from_list(shape_to_list(Shape{4, 32, 32, 16})) == Shape{4, 32, 32, 16});
  REQUIRE(decode_options(encode_options({{"a", "1"}, {"b", "x,y"}})) ==
          std::map<std::string, std::string>{{"a", "1"}, {"b", "x,y"}});
}
