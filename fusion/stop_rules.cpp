#include "fusion/stop_rules.h"

namespace mrmf {

bool PlateauRule::update(double train_loss) {
  if (!enabled()) return false;
  ++epochs_;
  if (has_prev_) {
    const double reduction = prev_ - train_loss;
    count_ = reduction < threshold_ ? count_ + 1 : 0;
  }
  prev_ = train_loss;
  has_prev_ = true;
  return fired();
}

}  // namespace mrmf
