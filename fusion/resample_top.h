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
// a target position d taken at source position (d + 0.5) * n / m - 0.5
// (the positions' centres aligned over the same extent; clamped at the
// ends), one axis after the other. The premise holds where the maps halve
// exactly (CosmoFlow's padded convolutions and pools); Neuron Inverter's
// unpadded convolutions lose a border at each block, so its maps do not
// span the same extent (T = 800 -> 11 positions, 1600 -> 24): there the
// receptive fields' centres differ by up to ~0.65 source positions at the
// far end (a review, session 51; not corrected -- an option beyond the
// paper's method, measured with this mapping in session 29). A weight (rank 2, [out, C * prod P]) is
// also scaled by prod(P_source) / prod(P_target), so that a sum over the
// target's positions of features like the source's has the source's size;
// vectors (BN weight, bias, running statistics) are not.
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

// `src` holds `outer` blocks laid out [C, from...]; `dst` receives them as
// [C, to...] (rank of from == rank of to, no axis of `to` shorter), each
// axis resampled linearly as described above, every value multiplied by
// `scale`.
void resample_positions(const float* src, const Shape& from, float* dst, const Shape& to, int64_t outer, float scale);

// MRT's transfer with the top resampled: bottom(coarse) and every top entry
// of equal shape copied, the flattened-map-sized ones resampled (see above),
// into a model built from target_spec. Errors name an entry that is neither.
std::unique_ptr<Model> transfer_resampled(Model& coarse, const ModelSpec& target_spec, Device device, uint64_t seed);

// MRT's transfer as experiment.mrt_top says: "resample" (above) or "fresh"
// (fuse.h's transfer_bottom, the paper's).
std::unique_ptr<Model> mrt_transfer(const std::string& mrt_top, Model& coarse, const ModelSpec& target_spec,
                                    Device device, uint64_t seed);

}  // namespace mrmf
