// Model fusion and transfer: the block copies at the heart of MRMF and MRT.
//
//   MRMF fusion (paper Sec. 3.2): M_f = bottom(M_c) + top(M_d), built for the
//     dense model's resolution. The bottom group (convolutions, their BN
//     layers and running statistics) comes from the coarse model, the whole
//     top group -- including the first FC layer, the only resolution-dependent
//     one -- from the dense model.
//   MRT transfer: bottom(M_c) into a freshly initialised model for the target
//     resolution (its top keeps its new initialisation).
// Both validate every block before copying anything (ParamStore::copy_from).
#pragma once

#include <memory>

#include "layers/module.h"
#include "models/registry.h"

namespace mrmf {

std::unique_ptr<Model> fuse_models(const Model& coarse, const Model& dense, const ModelSpec& dense_spec, Device device,
                                   uint64_t seed);
std::unique_ptr<Model> transfer_bottom(const Model& coarse, const ModelSpec& target_spec, Device device,
                                       uint64_t seed);
// A deep copy (same spec), e.g. to keep a stage's model while training goes on.
std::unique_ptr<Model> clone_model(const Model& m, const ModelSpec& spec, Device device);

}  // namespace mrmf
