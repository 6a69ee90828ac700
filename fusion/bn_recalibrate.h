// BatchNorm re-calibration after a fusion or transfer.
//
// A fused model's `bottom` group carries the coarse model's BN running
// statistics, measured on coarse inputs; its top group's were measured behind
// the dense model's own convolutions. In eval mode (validation) the fused
// model normalises with those stale statistics, and with a small momentum
// (CosmoFlow's 0.01: 0.99^128 = 28 % of them still there after a 128-step
// epoch) the fine-tuning run's validation loss shows them for two or three
// epochs, whatever the model has learned.
//
// The re-calibration forwards the first `batches` training batches in train
// mode -- no loss, no backward, no weight update -- with every BN layer's
// momentum set to 1/k at its k-th batch, so each running statistic becomes
// the plain average of its batch statistics at the new resolution (PyTorch's
// momentum=None, torch.optim.swa_utils.update_bn). Ranks then average their
// statistics, so every rank holds the same model.
//
// The same pass before every validation ("precise BN", train.precise_bn_batches)
// makes the validation loss that of the current weights: with momentum 0.01
// the running statistics otherwise average the last ~100 steps' activations,
// which lag the weights while the learning rate is high.
#pragma once

#include <cstdint>

#include "core/communicator.h"
#include "data/loader.h"
#include "layers/context.h"
#include "layers/module.h"

namespace mrmf {

struct BnRecalibration {
  int64_t batches = 0;  // batches forwarded on this rank
  double seconds = 0;   // wall time, loader waits included
};

// Uses the first batches of `loader`'s epoch `epoch` and leaves the loader
// mid-epoch (the trainer starts each epoch itself); leaves `ctx` in train mode
// with its dropout step unchanged. A model without BN buffers is left alone
// (0 batches). Every rank must call it with the same `batches`.
BnRecalibration recalibrate_batchnorm(Model& model, Context& ctx, data::Loader& loader, Communicator& comm,
                                      int64_t batches, int64_t epoch = 0);

}  // namespace mrmf
