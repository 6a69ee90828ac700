#include "models/cosmoflow.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "core/log.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/fused_block.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "models/extra_layers.h"

namespace mrmf {

const std::vector<std::string>& cosmoflow_variants() {
  static const std::vector<std::string> v{"mrmf", "lbann2019", "mlperf"};
  return v;
}

namespace {
using kernels::PoolKind;
using kernels::PoolParams;

std::string dims_str(const Shape& s) {
  return std::to_string(s[2]) + "x" + std::to_string(s[3]) + "x" + std::to_string(s[4]);
}

// Appends modules to a Sequential while tracking the activation shape, so
// every later layer (pool fitting, the first FC width) sees the real size.
struct Builder {
  Sequential& net;
  Shape shape;  // [1, C, D, H, W], then [1, F]
  CosmoFlowBuildInfo& info;

  template <class M>
  M& add(const std::string& name, std::unique_ptr<M> m, ParamGroup g) {
    try {
      shape = m->output_shape(shape);
    } catch (const Error& e) {
      MRMF_THROW(Config, "CosmoFlow: layer '", name, "' does not fit the activation ", shape.str(), ": ", e.what());
    }
    return net.add(name, std::move(m), g);
  }

  // `p` adjusted to the current activation: a dimension whose window does not
  // fit (output would be 0) is not pooled; none fits -> no pool at all.
  std::optional<PoolParams> fit_pool(const std::string& name, PoolParams p) {
    std::string dropped;
    int kept = 0;
    for (int d = 0; d < 3; ++d) {
      const auto i = static_cast<size_t>(d);
      if (shape[2 + d] + 2 * p.padding[i] >= p.kernel[i]) {
        ++kept;
        continue;
      }
      p.kernel[i] = p.stride[i] = 1;
      p.padding[i] = 0;
      dropped += (dropped.empty() ? "" : ",") + std::string(1, "DHW"[d]);
    }
    if (kept == 0) {
      info.skipped_pools.push_back(name + " (input " + dims_str(shape) + ")");
      return std::nullopt;
    }
    if (!dropped.empty()) info.reduced_pools.push_back(name + " (not over " + dropped + ", input " + dims_str(shape) + ")");
    return p;
  }
};

struct Block {
  std::string conv, bn, act, pool;  // names; bn empty = no BN
  int64_t in = 0, out = 0, stride = 1;
  bool bias = true;
  float slope = 0.f;
  PoolKind pool_kind = PoolKind::None;
  PoolParams pool_params;
};

void add_block(Builder& b, const CosmoFlowConfig& c, Block k) {
  b.add(k.conv, std::make_unique<Conv3d>(k.in, k.out, 3, k.stride, same_padding(3), k.bias), ParamGroup::Bottom);
  std::optional<PoolParams> pool;
  if (k.pool_kind != PoolKind::None) {
    // The pool sees the conv output (BN and activation keep the shape).
    pool = b.fit_pool(k.pool, k.pool_params);
  }
  if (c.fused) {
    BnActPoolOptions o;
    o.bn_channels = k.bn.empty() ? 0 : k.out;
    o.spatial_dims = 3;
    o.act = true;
    o.slope = k.slope;
    o.pool = pool ? k.pool_kind : PoolKind::None;
    if (pool) o.pool_params = *pool;
    o.eps = c.bn_eps;
    o.momentum = c.bn_momentum;
    // Named after the BN when there is one, so its parameters are bn{i}.*.
    b.add(k.bn.empty() ? k.act : k.bn, std::make_unique<BnActPool>(o), ParamGroup::Bottom);
    return;
  }
  if (!k.bn.empty()) b.add(k.bn, std::make_unique<BatchNorm3d>(k.out, c.bn_eps, c.bn_momentum), ParamGroup::Bottom);
  b.add(k.act, std::make_unique<LeakyReLU>(k.slope), ParamGroup::Bottom);
  if (!pool) return;
  const auto& p = *pool;
  if (k.pool_kind == PoolKind::Max)
    b.add(k.pool, std::make_unique<MaxPool3d>(p.kernel, p.stride, p.padding), ParamGroup::Bottom);
  else
    b.add(k.pool, std::make_unique<AvgPool3d>(p.kernel, p.stride, p.padding, p.count_include_pad), ParamGroup::Bottom);
}

void build_mrmf(Builder& b, const CosmoFlowConfig& c) {
  const float drop = c.dropout < 0.f ? 0.05f : c.dropout;
  b.add("bn1", std::make_unique<BatchNorm3d>(c.channels, c.bn_eps, c.bn_momentum), ParamGroup::Bottom);
  const int64_t widths[7] = {16, 32, 64, 128, 256, 256, 256};
  int64_t in = c.channels;
  for (int i = 1; i <= 7; ++i) {
    Block k;
    const std::string s = std::to_string(i);
    k.conv = "conv" + s;
    k.bn = "bn" + std::to_string(i + 1);
    k.act = "relu" + s;
    k.pool = "pool" + s;
    k.in = in;
    k.out = widths[i - 1];
    k.stride = i == 4 ? 2 : 1;
    k.slope = 0.f;
    if (i <= 5) {
      k.pool_kind = PoolKind::Avg;
      k.pool_params = PoolParams::make_3d({2, 2, 2});
    }
    add_block(b, c, k);
    in = k.out;
  }
  b.add("pool_to_full", std::make_unique<Flatten>(), ParamGroup::Top);
  b.info.flat = b.shape[1];
  b.add("drop1", std::make_unique<Dropout>(drop), ParamGroup::Top);
  b.add("full1", std::make_unique<Linear>(b.info.flat, 2048), ParamGroup::Top);
  b.add("drop2", std::make_unique<Dropout>(drop), ParamGroup::Top);
  b.add("relu8", std::make_unique<ReLU>(), ParamGroup::Top);
  b.add("full2", std::make_unique<Linear>(2048, 256), ParamGroup::Top);
  b.add("drop3", std::make_unique<Dropout>(drop), ParamGroup::Top);
  b.add("relu9", std::make_unique<ReLU>(), ParamGroup::Top);
  b.add("full3", std::make_unique<Linear>(256, c.outputs), ParamGroup::Top);
}

void build_lbann(Builder& b, const CosmoFlowConfig& c) {
  const float drop = c.dropout < 0.f ? 0.2f : c.dropout;
  const float slope = 0.01f;  // lbann.LeakyRelu default
  const int64_t widths[7] = {16, 32, 64, 128, 256, 256, 256};
  int64_t in = c.channels;
  for (int i = 1; i <= 7; ++i) {
    Block k;
    const std::string s = std::to_string(i);
    k.conv = "conv" + s;
    k.act = "act" + s;
    k.pool = "pool" + s;
    k.in = in;
    k.out = widths[i - 1];
    k.stride = i == 4 ? 2 : 1;
    k.bias = false;
    k.slope = slope;
    if (i <= 5) {
      k.pool_kind = PoolKind::Avg;
      k.pool_params = PoolParams::make_3d({3, 3, 3}, {2, 2, 2}, {1, 1, 1}, /*include_pad=*/true);
    }
    add_block(b, c, k);
    in = k.out;
  }
  b.add("flatten", std::make_unique<Flatten>(), ParamGroup::Top);
  b.info.flat = b.shape[1];
  // LBANN: dropout before every FC layer, LeakyReLU between them.
  const int64_t fc[3] = {2048, 256, c.outputs};
  int64_t f = b.info.flat;
  for (int j = 1; j <= 3; ++j) {
    const std::string s = std::to_string(j);
    b.add("drop" + s, std::make_unique<Dropout>(drop), ParamGroup::Top);
    b.add("fc" + s, std::make_unique<Linear>(f, fc[j - 1]), ParamGroup::Top);
    if (j < 3) b.add("act" + std::to_string(7 + j), std::make_unique<LeakyReLU>(slope), ParamGroup::Top);
    f = fc[j - 1];
  }
}

void build_mlperf(Builder& b, const CosmoFlowConfig& c) {
  const float drop = c.dropout < 0.f ? 0.5f : c.dropout;
  const float slope = 0.3f;  // Keras LeakyReLU default alpha
  int64_t in = c.channels;
  for (int i = 1; i <= 5; ++i) {
    Block k;
    const std::string s = std::to_string(i);
    k.conv = "conv" + s;
    k.act = "act" + s;
    k.pool = "pool" + s;
    k.in = in;
    k.out = int64_t{32} << (i - 1);
    k.slope = slope;
    k.pool_kind = PoolKind::Max;
    k.pool_params = PoolParams::make_3d({2, 2, 2});
    add_block(b, c, k);
    in = k.out;
  }
  b.add("flatten", std::make_unique<Flatten>(), ParamGroup::Top);
  b.info.flat = b.shape[1];
  b.add("fc1", std::make_unique<Linear>(b.info.flat, 128), ParamGroup::Top);
  b.add("act6", std::make_unique<LeakyReLU>(slope), ParamGroup::Top);
  b.add("drop1", std::make_unique<Dropout>(drop), ParamGroup::Top);
  b.add("fc2", std::make_unique<Linear>(128, 64), ParamGroup::Top);
  b.add("act7", std::make_unique<LeakyReLU>(slope), ParamGroup::Top);
  b.add("drop2", std::make_unique<Dropout>(drop), ParamGroup::Top);
  b.add("fc3", std::make_unique<Linear>(64, c.outputs), ParamGroup::Top);
  b.add("out", std::make_unique<ScaledTanh>(1.2f), ParamGroup::Top);
}
}  // namespace

std::unique_ptr<Model> build_cosmoflow(const CosmoFlowConfig& c, CosmoFlowBuildInfo* info_out) {
  const auto& vs = cosmoflow_variants();
  MRMF_CHECK_KIND(Config, std::find(vs.begin(), vs.end(), c.variant) != vs.end(), "unknown CosmoFlow variant '",
                  c.variant, "': expected mrmf, lbann2019 or mlperf");
  MRMF_CHECK_KIND(Config, c.channels > 0 && c.outputs > 0 && c.spatial[0] > 0 && c.spatial[1] > 0 && c.spatial[2] > 0,
                  "CosmoFlow: channels, outputs and D, H, W must be positive, got C = ", c.channels, ", ",
                  c.spatial[0], "x", c.spatial[1], "x", c.spatial[2], ", outputs = ", c.outputs);
  MRMF_CHECK_KIND(Config, c.dropout < 1.f, "CosmoFlow: dropout ", c.dropout, " must be < 1");
  // BN computes in float32: an eps beyond its range became inf and trained
  // on without an error.
  MRMF_CHECK_KIND(Config, c.bn_eps > 0 && c.bn_eps <= 3.4028234663852886e38 && c.bn_momentum >= 0 && c.bn_momentum <= 1,
                  "CosmoFlow: BN eps ", c.bn_eps, " / momentum ", c.bn_momentum,
                  " invalid (eps in (0, 3.4e38], momentum in [0, 1])");

  const Shape sample{c.channels, c.spatial[0], c.spatial[1], c.spatial[2]};
  auto model = std::make_unique<Model>("cosmoflow", sample);
  CosmoFlowBuildInfo info;
  Builder b{model->net(), Shape{1, c.channels, c.spatial[0], c.spatial[1], c.spatial[2]}, info};
  if (c.variant == "mrmf")
    build_mrmf(b, c);
  else if (c.variant == "lbann2019")
    build_lbann(b, c);
  else
    build_mlperf(b, c);

  if (!info.skipped_pools.empty() || !info.reduced_pools.empty()) {
    std::ostringstream os;
    for (const auto& s : info.skipped_pools) os << " skipped " << s << ";";
    for (const auto& s : info.reduced_pools) os << " reduced " << s << ";";
    log::info("CosmoFlow ({}) at {}x{}x{}: pools that would reach size 0:{}", c.variant, c.spatial[0], c.spatial[1],
              c.spatial[2], os.str());
  }
  if (info_out) *info_out = info;
  return model;
}

}  // namespace mrmf
