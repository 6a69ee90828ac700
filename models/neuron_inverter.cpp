#include "models/neuron_inverter.h"

#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/fused_block.h"
#include "layers/linear.h"
#include "layers/pooling.h"

namespace mrmf {

const char* input_layout_name(NiInputLayout l) {
  return l == NiInputLayout::Transpose ? "transpose" : "view";
}

NiInputLayout parse_input_layout(const std::string& s) {
  if (s == "transpose") return NiInputLayout::Transpose;
  if (s == "view" || s == "reinterpret_view") return NiInputLayout::ReinterpretView;
  MRMF_THROW(Config, "unknown Neuron Inverter input layout '", s, "': expected transpose or view");
}

namespace {
void validate(const NeuronInverterConfig& c) {
  MRMF_CHECK_KIND(Config, c.time_bins > 0 && c.channels > 0, "Neuron Inverter: T and C must be positive, got T = ",
                  c.time_bins, ", C = ", c.channels);
  MRMF_CHECK_KIND(Config, !c.conv_channels.empty() && !c.fc_widths.empty(),
                  "Neuron Inverter: needs at least one conv and one FC layer");
  for (int64_t w : c.conv_channels) MRMF_CHECK_KIND(Config, w > 0, "Neuron Inverter: conv width ", w);
  for (int64_t w : c.fc_widths) MRMF_CHECK_KIND(Config, w > 0, "Neuron Inverter: FC width ", w);
  MRMF_CHECK_KIND(Config, c.kernel > 0 && c.pool > 0 && c.outputs > 0, "Neuron Inverter: kernel ", c.kernel,
                  ", pool ", c.pool, ", outputs ", c.outputs, " must be positive");
  MRMF_CHECK_KIND(Config, c.dropout >= 0.f && c.dropout < 1.f, "Neuron Inverter: dropout ", c.dropout,
                  " not in [0, 1)");
}

// The three conv blocks, appended to `cnn` under ModuleList indices
// (conv at 3 i, pool at 3 i + 1, ReLU at 3 i + 2; the fused block takes index
// 3 i + 1 and leaves 3 i + 2 unused -- neither has parameters).
void add_cnn_block(Sequential& cnn, const NeuronInverterConfig& c) {
  int64_t in = c.channels;
  for (size_t i = 0; i < c.conv_channels.size(); ++i) {
    const int64_t out = c.conv_channels[i];
    const std::string base = std::to_string(3 * i);
    cnn.add(base, std::make_unique<Conv1d>(in, out, c.kernel, 1, 0, true), ParamGroup::Bottom);
    if (c.fused) {
      // ReLU commutes with max pooling, so pool+ReLU is one pass over the conv output.
      BnActPoolOptions o;
      o.spatial_dims = 1;
      o.act = true;
      o.slope = 0.f;
      o.pool = kernels::PoolKind::Max;
      o.pool_params = kernels::PoolParams::make_1d(c.pool);
      cnn.add(std::to_string(3 * i + 1), std::make_unique<BnActPool>(o), ParamGroup::Bottom);
    } else {
      cnn.add(std::to_string(3 * i + 1), std::make_unique<MaxPool1d>(c.pool), ParamGroup::Bottom);
      cnn.add(std::to_string(3 * i + 2), std::make_unique<ReLU>(), ParamGroup::Bottom);
    }
    in = out;
  }
}

int64_t cnn_flat(const Sequential& cnn, const NeuronInverterConfig& c) {
  try {
    const Shape s = cnn.output_shape(Shape{1, c.channels, c.time_bins});
    return s[1] * s[2];
  } catch (const Error& e) {
    MRMF_THROW(Config, "Neuron Inverter: T = ", c.time_bins, " is too short for ", c.conv_channels.size(),
               " conv (k=", c.kernel, ") + pool (", c.pool, ") blocks: ", e.what());
  }
}
}  // namespace

int64_t neuron_inverter_flat_size(const NeuronInverterConfig& cfg) {
  validate(cfg);
  Sequential cnn;
  add_cnn_block(cnn, cfg);
  return cnn_flat(cnn, cfg);
}

std::unique_ptr<Model> build_neuron_inverter(const NeuronInverterConfig& c) {
  validate(c);
  auto model = std::make_unique<Model>("neuron_inverter", Shape{c.channels, c.time_bins});
  Sequential& net = model->net();

  auto& cnn = net.add("cnn_block", std::make_unique<Sequential>(), ParamGroup::Bottom);
  add_cnn_block(cnn, c);
  const int64_t flat = cnn_flat(cnn, c);

  // Everything from here on is sized by `flat` or follows it: group top.
  net.add("flatten", std::make_unique<Flatten>(), ParamGroup::Top);
  if (c.flat_bn) net.add("flat_bn", std::make_unique<BatchNorm1d>(flat), ParamGroup::Top);

  auto& fc = net.add("fc_block", std::make_unique<Sequential>(), ParamGroup::Top);
  // Index arithmetic of the original ModuleList: Linear, ReLU, [Dropout].
  const size_t per = c.dropout > 0.f ? 3 : 2;
  int64_t in = flat;
  size_t idx = 0;
  for (int64_t w : c.fc_widths) {
    fc.add(std::to_string(idx), std::make_unique<Linear>(in, w), ParamGroup::Top);
    fc.add(std::to_string(idx + 1), std::make_unique<ReLU>(), ParamGroup::Top);
    if (per == 3) fc.add(std::to_string(idx + 2), std::make_unique<Dropout>(c.dropout), ParamGroup::Top);
    idx += per;
    in = w;
  }
  fc.add(std::to_string(idx), std::make_unique<Linear>(in, c.outputs), ParamGroup::Top);
  return model;
}

}  // namespace mrmf
