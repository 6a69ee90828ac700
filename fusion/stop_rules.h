// Stop conditions of a training run.
//
// The loss-plateau rule is the MRMF paper's (Sec. 3.2): "if the training
// loss reduction is smaller than the threshold eps for a consecutive of T_p
// epochs, we stop the training". The reduction of epoch e is
// loss[e-1] - loss[e]; the first epoch has no reduction and never counts.
// `min_epochs` (not in the paper) keeps the rule from stopping a run before
// that many epochs: a short flat stretch early in training (a coarse
// CosmoFlow stage stopped after 3 epochs with patience 1, session 22) is not
// the plateau the rule is meant to find. The epochs before it still count
// towards T_p, so the rule fires at the first epoch >= min_epochs that ends
// T_p small reductions in a row.
//
// `against_best` (stop.plateau_reference: best; not in the paper) measures
// each epoch's reduction from the lowest loss so far instead of from the
// epoch before. With small batches an epoch's training loss moves by more
// than the paper's thresholds from noise alone: session 25's 32^3 coarse
// stage (CosmoFlow, batch 8) sat at 0.187-0.195 for 11 epochs, and every
// drop of 0.002-0.008 after a rise reset the paper's count, so threshold
// 0.002 / patience 5 never fired. Against the best, a flat but noisy loss
// counts as flat (the rule of ReduceLROnPlateau).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace mrmf {

class PlateauRule {
 public:
  PlateauRule(double threshold, int64_t patience, int64_t min_epochs = 0, bool against_best = false)
      : threshold_(threshold), patience_(patience), min_epochs_(min_epochs), against_best_(against_best) {}
  bool enabled() const { return threshold_ > 0 && patience_ > 0; }
  // Whether the rule can fire within a guard of `max_epochs`: it first
  // fires after patience + 1 epochs (the first epoch has no reduction), and
  // never before min_epochs. A disabled rule never needs to.
  bool can_fire_within(int64_t max_epochs) const {
    // (patience < max_epochs, not patience + 1 <= max_epochs: INT64_MAX + 1 wrapped.)
    return !enabled() || (patience_ < max_epochs && min_epochs_ <= max_epochs);
  }
  // Feeds one epoch's training loss; true when the rule fires.
  bool update(double train_loss);
  int64_t count() const { return count_; }
  // Whether the last update() fired (a checkpoint written at that epoch
  // restores a rule that has already stopped the run).
  bool fired() const { return enabled() && count_ >= patience_ && epochs_ >= min_epochs_; }
  // For checkpoints: the rule's memory (the lowest loss so far where
  // against_best).
  double previous() const { return prev_; }
  bool has_previous() const { return has_prev_; }
  // `epochs`: the epochs the checkpoint covers (updates made).
  void restore(int64_t count, bool has_prev, double prev, int64_t epochs) {
    epochs_ = epochs;
    count_ = count;
    has_prev_ = has_prev;
    prev_ = prev;
  }

 private:
  double threshold_;
  int64_t patience_;
  int64_t min_epochs_;
  bool against_best_;
  int64_t epochs_ = 0;  // updates so far
  int64_t count_ = 0;
  bool has_prev_ = false;
  double prev_ = 0;
};

}  // namespace mrmf
