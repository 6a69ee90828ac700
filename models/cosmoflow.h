// CosmoFlow 3-D CNNs (4 regression targets) -- see /work/shared/REFERENCE.md.
//
// Variants (CosmoFlowConfig::variant):
//  "mrmf" (default): the MRMF authors' denser_model (NU-CUCIS/Multi-resolution-
//     Training, cosmoflow/model/denser_model.py, a Keras model):
//       bn1: BatchNorm3d(4) on the raw input
//       conv{i} Conv3d(k3, 'same') 16,32,64,128(stride 2),256,256,256
//         -> bn{i+1} BatchNorm3d -> relu{i} -> pool{i} AvgPool3d(2) (i <= 5)
//       flatten -> drop1 Dropout(.05) -> full1 Linear(flat, 2048) -> drop2 -> relu8
//         -> full2 Linear(2048, 256) -> drop3 -> relu9 -> full3 Linear(256, 4)
//  "lbann2019": LBANN's CosmoFlow: conv{i} (no bias) -> act{i} LeakyReLU(0.01)
//       -> pool{i} AvgPool3d(k3, s2, p1, counting padding) (i <= 5), conv4 stride 2;
//       [drop{j} Dropout(0.2) -> fc{j}] j = 1..3 (2048, 256, 4), LeakyReLU between.
//  "mlperf": MLPerf HPC reference: 5 x [conv{i} Conv3d(32 * 2^(i-1), k3, same)
//       -> act{i} LeakyReLU(0.3) -> pool{i} MaxPool3d(2)];
//       fc1 Linear(flat, 128) -> LeakyReLU -> Dropout(0.5) -> fc2 (64) -> ... -> fc3 (4)
//       -> out: 1.2 * tanh.
//
// Parameter names are the originals' layer names (conv1.weight, bn2.running_mean,
// full1.weight / fc1.weight) in PyTorch layout ([out, in, kD, kH, kW]).
// Notes on fidelity to the Keras original ("mrmf"):
//  - BN constants default to Keras' BatchNormalization (epsilon 1e-3, momentum
//    0.99 = PyTorch momentum 0.01); configurable.
//  - conv4 uses PyTorch-style symmetric padding 1 at stride 2; sizes equal TF's
//    'same', but for even inputs TF pads (0, 1) instead of (1, 1), so the
//    sampling grid differs by one voxel.
//  - Keras flattens channels-last (D, H, W, C); we flatten channel-major
//    (C, D, H, W) like PyTorch. Importing Keras full1 weights needs a column
//    permutation (not needed for PyTorch state dicts).
//
// Any input size (cubic or not): the flat size comes from output_shape. A pool
// window that does not fit a dimension (size < kernel, e.g. 1 voxel left at
// 16^3) is dropped for that dimension; a pool that fits no dimension is
// skipped. Both are reported once per build (log::info) and in CosmoFlowBuildInfo.
//
// Groups: convolutions and BN are `bottom`; FC layers are `top` (only full1's
// input width depends on the resolution).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace mrmf {

struct CosmoFlowConfig {
  std::string variant = "mrmf";  // "mrmf" | "lbann2019" | "mlperf"
  int64_t channels = 4;
  std::array<int64_t, 3> spatial{128, 128, 128};  // D, H, W
  int64_t outputs = 4;
  float dropout = -1.f;  // < 0: the variant's own (0.05 / 0.2 / 0.5)
  double bn_eps = 1e-3;        // "mrmf" only (Keras default)
  double bn_momentum = 0.01;   // "mrmf" only (Keras momentum 0.99, PyTorch convention)
  // Conv -> [BN] -> activation -> pool epilogue as one fused pass
  // (layers/fused_block.h): same numbers, same parameter names.
  bool fused = true;
};

struct CosmoFlowBuildInfo {
  int64_t flat = 0;                       // features entering the first FC layer
  std::vector<std::string> skipped_pools;  // pools dropped entirely, e.g. "pool5 (input 1x1x1)"
  std::vector<std::string> reduced_pools;  // pools applied over fewer dimensions
};

const std::vector<std::string>& cosmoflow_variants();

// An unbuilt model named "cosmoflow" with sample shape (C, D, H, W). The
// originals initialise with Glorot-uniform (Keras / LBANN): build with
// InitScheme::GlorotUniform to match them.
std::unique_ptr<Model> build_cosmoflow(const CosmoFlowConfig& cfg, CosmoFlowBuildInfo* info = nullptr);

}  // namespace mrmf
