// The Neuron Inverter 1-D CNN (Jan Balewski's neuron_inverter_benchmark,
// torch/toolbox/Model.py, class CNNandFC_Model) -- see /work/shared/REFERENCE.md.
//
//   input [N, C, T]
//   cnn_block: 3 x [Conv1d(k=4, stride 1, no pad) -> MaxPool1d(4) -> ReLU]   group bottom
//   flatten (channel-major, = x.view(-1, flat_dim))
//   flat_bn:  BatchNorm1d(flat_dim)                                          group top
//   fc_block: 5 x [Linear -> ReLU -> Dropout(0.05)], Linear(128 -> 19)       group top
//
// Parameter names are the original's state_dict keys: the CNN and FC stacks are
// nn.ModuleLists, so parameters carry their list index --
//   cnn_block.{0,3,6}.{weight,bias}
//   flat_bn.{weight,bias,running_mean,running_var,num_batches_tracked}
//   fc_block.{0,3,6,9,12,15}.{weight,bias}       (dropout 0: {0,2,4,6,8,10},
//                                                 as the original omits Dropout)
// so a torch.save(model.state_dict()) of the original converts 1:1
// (scripts/torch_state_dict.py).
//
// Why flat_bn is in the `top` group: its size is the flat size, which depends
// on the time resolution exactly like fc_block.0's input width (4320 / 1980 /
// 900 for T = 1600 / 800 / 400). Putting it in `bottom` would make the bottom
// group resolution dependent and MRMF fusion (copy the coarse bottom into the
// dense model) impossible. So the bottom is the three convolutions only; the
// top is re-used from the dense model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace mrmf {

// How frames stored (N, T, C) on disk become the model's [N, C, T] input.
// The loader does the data movement; the model only records the choice.
enum class NiInputLayout {
  Transpose,        // a real transpose (physically meaningful)
  ReinterpretView,  // the original's x.view(-1, C, T): memory reinterpreted, not transposed
};
const char* input_layout_name(NiInputLayout l);     // "transpose" | "view"
NiInputLayout parse_input_layout(const std::string& s);  // also accepts "reinterpret_view"

struct NeuronInverterConfig {
  int64_t time_bins = 1600;  // T
  int64_t channels = 3;      // C
  std::vector<int64_t> conv_channels{30, 90, 180};
  int64_t kernel = 4;
  int64_t pool = 4;
  std::vector<int64_t> fc_widths{512, 512, 512, 256, 128};
  int64_t outputs = 19;
  float dropout = 0.05f;
  bool flat_bn = true;  // the original's hpar batch_norm_flat
  NiInputLayout input_layout = NiInputLayout::Transpose;
  // Max pooling and ReLU as one fused pass (layers/fused_block.h); same
  // numbers, same (parameter-free) names. false = plain MaxPool1d + ReLU.
  bool fused = true;
};

// Flat size after the CNN block (checks that T is long enough).
int64_t neuron_inverter_flat_size(const NeuronInverterConfig& cfg);

// An unbuilt model named "neuron_inverter" with sample shape (C, T); call
// build(device, seed) on it (PyTorch default init matches the original).
std::unique_ptr<Model> build_neuron_inverter(const NeuronInverterConfig& cfg);

}  // namespace mrmf
