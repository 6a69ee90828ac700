#include "fusion/stop_rules.h"

namespace mrmf {

bool PlateauRule::update(double train_loss) {
  if (!enabled()) return false;
  ++epochs_;
  if (has_prev_) {
    const double reduction = prev_ - train_loss;
    count_ = reduction < threshold_ ? count_ + 1 : 0;
  }
  // Against the best: a loss above the reference leaves it where it is.
  prev_ = against_best_ && has_prev_ && !(train_loss < prev_) ? prev_ : train_loss;
  has_prev_ = true;
  return fired();
}

}  // namespace mrmf
