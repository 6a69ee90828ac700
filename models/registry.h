// Model registry: one entry point that builds any mrmf model from a spec
// (name, variant, per-sample input shape, string options), as the CLI, the
// trainer and checkpoints describe models. A checkpoint stores the spec, so a
// checkpoint alone rebuilds its model (fusion/checkpoint.h).
//
// Options (all optional; unknown keys are a Config error):
//   neuron_inverter  sample_shape (C, T)
//     conv_channels "30,90,180"   kernel 4   pool 4   fc "512,512,512,256,128"
//     outputs 19   dropout 0.05   flat_bn true   input_layout transpose|view   fused true
//   cosmoflow        sample_shape (C, D, H, W); variants mrmf (default), lbann2019, mlperf
//     outputs 4   dropout <variant default>   bn_eps 1e-3   bn_momentum 0.01   fused true
#pragma once

#include <map>
#include <memory>
#include <string>

#include "layers/module.h"
#include "models/cosmoflow.h"
#include "models/neuron_inverter.h"

namespace mrmf {

struct ModelSpec {
  std::string name;     // "neuron_inverter" | "cosmoflow"
  std::string variant;  // "" = the model's default ("default" / "mrmf")
  Shape sample_shape;   // (C, spatial...), no batch dimension
  std::map<std::string, std::string> options;

  std::string str() const;  // "cosmoflow/mrmf (4, 32, 32, 32) fused=true"
};

// The spec with its default variant filled in; validates name and variant.
ModelSpec normalized(const ModelSpec& spec);

// An unbuilt model; the caller builds it: model->build(device, seed, default_init_scheme(spec)).
std::unique_ptr<Model> build_model(const ModelSpec& spec);
// The originals' initialisation: PyTorch defaults for the Neuron Inverter,
// Glorot-uniform (Keras / LBANN) for CosmoFlow.
InitScheme default_init_scheme(const ModelSpec& spec);

// Typed configs from a spec (for code that needs e.g. the NI input layout).
NeuronInverterConfig neuron_inverter_config(const ModelSpec& spec);
CosmoFlowConfig cosmoflow_config(const ModelSpec& spec);

// A human-readable table: every layer with its state-dict path, type, output
// shape (batch 1), parameter count and group, then totals per group.
std::string describe(Model& model);

// Text forms used in checkpoint attributes.
std::string shape_to_list(const Shape& s);             // "4,32,32,32"
Shape shape_from_list(const std::string& s);           // inverse; Config error on junk
std::string encode_options(const std::map<std::string, std::string>& o);  // "k=v\n" lines, sorted
std::map<std::string, std::string> decode_options(const std::string& s);

}  // namespace mrmf
