// Stop conditions of a training run.
//
// The loss-plateau rule is the MRMF paper's (Sec. 3.2): "if the training
// loss reduction is smaller than the threshold eps for a consecutive of T_p
// epochs, we stop the training". The reduction of epoch e is
// loss[e-1] - loss[e]; the first epoch has no reduction and never counts.
#pragma once

#include <cstdint>
#include <string>

namespace mrmf {

class PlateauRule {
 public:
  PlateauRule(double threshold, int64_t patience) : threshold_(threshold), patience_(patience) {}
  bool enabled() const { return threshold_ > 0 && patience_ > 0; }
  // Feeds one epoch's training loss; true when the rule fires.
  bool update(double train_loss);
  int64_t count() const { return count_; }
  // Whether the last update() fired (a checkpoint written at that epoch
  // restores a rule that has already stopped the run).
  bool fired() const { return enabled() && count_ >= patience_; }
  // For checkpoints: the rule's memory.
  double previous() const { return prev_; }
  bool has_previous() const { return has_prev_; }
  void restore(int64_t count, bool has_prev, double prev) {
    count_ = count;
    has_prev_ = has_prev;
    prev_ = prev;
  }

 private:
  double threshold_;
  int64_t patience_;
  int64_t count_ = 0;
  bool has_prev_ = false;
  double prev_ = 0;
};

}  // namespace mrmf
