// MRT with the top group carried over as well (experiment.mrt_top: resample).
//
// The paper's MRT copies only the convolutional `bottom` group; the target
// model's whole `top` starts fresh. On Neuron Inverter that top holds 2.9 M
// of the model's 2.99 M parameters, and a fresh one throws away nearly all
// that the coarse stage learned (session 28's probe: after the transfer the
// first T = 1600 epoch ends where the baseline's first epoch ends). Only the
// layers fed by the flattened feature map depend on the resolution -- the
// first FC layer's weight and, where the model has one, the BN over the
// flat features. Resampled along the feature map's spatial positions, and
// every other top parameter copied, the coarse model's function carries
// over (the probe: its loss kept whole after one epoch).
//
// Resampling: each spatial axis of the flattened [C, P1, ...] map, linearly,
// one axis after the other, a target position taken where the source map
// has a receptive field centred on the same point of the original input
// (clamped at the ends). The centres come from the layers' geometry
// (Module::centre_map) and the coarse input's block averaging. Sessions
// 29-52 spread both maps' centres over the same extent instead, target d at
// source (d + 0.5) / f - 0.5, which the layers do not: Neuron Inverter's
// unpadded convolutions lose a border at each block (T = 800 -> 11
// positions, 1600 -> 24), and the match is d / 2 - 0.496 where the
// same-extent guess was up to ~0.65 source positions off; on CosmoFlow,
// conv4's stride 2 centres its windows on even positions, d / 2 - 0.219
// for a halved axis against d / 2 - 0.25. A weight (rank 2,
// [out, C * prod P]) is also scaled by prod(P_source) / prod(P_target), so
// that a sum over the target's positions of features like the source's has
// the source's size; vectors (BN weight, bias, running statistics) are not.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"
#include "models/registry.h"

namespace mrmf {

// The per-sample shape [C, P1, ...] that the model's Flatten layer flattens
// (throws Config when the model has none).
Shape flattened_feature_shape(Model& m);

// Per spatial axis of the flattened map, where its positions are centred in
// the model's input (Module::centre_map of the layers before the Flatten,
// composed). Throws Config naming a layer that does not say.
std::vector<CentreMap> flattened_feature_centres(Model& m);

// `src` holds `outer` blocks laid out [C, from...]; `dst` receives them as
// [C, to...] (rank of from == rank of to, no axis of `to` shorter), each
// spatial axis a resampled linearly, target position d taken at source
// position at[a - 1].scale * d + at[a - 1].offset (clamped to the source's
// ends), every value multiplied by `scale`.
void resample_positions(const float* src, const Shape& from, float* dst, const Shape& to, int64_t outer, float scale,
                        const std::vector<CentreMap>& at);

// Where MRT's resampling takes the target's flattened positions in the
// coarse model's map: the positions whose receptive fields are centred on
// the same point of the input, the coarse input's element j standing for
// the block of f target-input elements it averages (f = the ratio of the
// two input extents, which must be an integer).
std::vector<CentreMap> matching_positions(Model& coarse, Model& target);

// MRT's transfer with the top resampled: bottom(coarse) and every top entry
// of equal shape copied, the flattened-map-sized ones resampled (see above),
// into a model built from target_spec. Errors name an entry that is neither.
std::unique_ptr<Model> transfer_resampled(Model& coarse, const ModelSpec& target_spec, Device device, uint64_t seed);

// MRT's transfer as experiment.mrt_top says: "resample" (above) or "fresh"
// (fuse.h's transfer_bottom, the paper's).
std::unique_ptr<Model> mrt_transfer(const std::string& mrt_top, Model& coarse, const ModelSpec& target_spec,
                                    Device device, uint64_t seed);

}  // namespace mrmf
