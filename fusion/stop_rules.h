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
#pragma once

#include <cstdint>
#include <string>

namespace mrmf {

class PlateauRule {
 public:
  PlateauRule(double threshold, int64_t patience, int64_t min_epochs = 0)
      : threshold_(threshold), patience_(patience), min_epochs_(min_epochs) {}
  bool enabled() const { return threshold_ > 0 && patience_ > 0; }
  // Feeds one epoch's training loss; true when the rule fires.
  bool update(double train_loss);
  int64_t count() const { return count_; }
  // Whether the last update() fired (a checkpoint written at that epoch
  // restores a rule that has already stopped the run).
  bool fired() const { return enabled() && count_ >= patience_ && epochs_ >= min_epochs_; }
  // For checkpoints: the rule's memory.
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
  int64_t epochs_ = 0;  // updates so far
  int64_t count_ = 0;
  bool has_prev_ = false;
  double prev_ = 0;
};

}  // namespace mrmf
