// Learning-rate schedules: lr(epoch, step), composable by wrapping.
//
// `epoch` is the 0-based epoch being trained; `step` the number of optimizer
// steps completed before this update (0 for the very first update), i.e. the
// TF/Keras `global_step` convention. Decays choose whether they count in
// steps or epochs (ScheduleUnit).
//
// Recipes:
//   Neuron Inverter: LinearWarmup(W, ScheduleUnit::Epoch, ReduceLROnPlateau(ConstantLr(lr), ...))
//                    -> lr (epoch + 1) / W for the first W epochs
//   CosmoFlow:       PiecewiseConstant({1600, 2400}, {8e-4, 8e-5, 8e-6})
//
// Stateful schedules (ReduceLROnPlateau) expose their state as a flat
// name -> number map for checkpoints; wrappers nest their inner state under
// "inner.". Note: ReduceLROnPlateau's "best" is +-inf before the first metric.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mrmf {

using ScheduleState = std::map<std::string, double>;

enum class ScheduleUnit { Step, Epoch };

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr(int64_t epoch, int64_t step) const = 0;
  virtual std::string describe() const = 0;
  // End-of-epoch hook with the validation metric; only plateau schedules use it.
  // Wrappers forward it to their inner schedule.
  virtual void on_epoch_end(double metric) {}
  virtual ScheduleState state() const { return {}; }
  virtual void load_state(const ScheduleState& s) {}
};

using LrSchedulePtr = std::unique_ptr<LrSchedule>;

class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr);
  double lr(int64_t, int64_t) const override { return lr_; }
  std::string describe() const override;

 private:
  double lr_;
};

// inner(e, s) * (c + 1) / warmup while c < warmup, inner(e, s) after; c is
// the epoch (Unit Epoch) or the step (Unit Step).
class LinearWarmup : public LrSchedule {
 public:
  LinearWarmup(int64_t warmup, ScheduleUnit unit, LrSchedulePtr inner);
  double lr(int64_t epoch, int64_t step) const override;
  std::string describe() const override;
  void on_epoch_end(double metric) override { inner_->on_epoch_end(metric); }
  ScheduleState state() const override;
  void load_state(const ScheduleState& s) override;
  LrSchedule& inner() { return *inner_; }

 private:
  int64_t warmup_;
  ScheduleUnit unit_;
  LrSchedulePtr inner_;
};

// values[k] where k = number of boundaries strictly below the counter
// (tf.compat.v1.train.piecewise_constant: x <= b0 -> v0, b0 < x <= b1 -> v1, ...).
// values.size() == boundaries.size() + 1; boundaries strictly increasing.
class PiecewiseConstant : public LrSchedule {
 public:
  PiecewiseConstant(std::vector<int64_t> boundaries, std::vector<double> values,
                    ScheduleUnit unit = ScheduleUnit::Step);
  double lr(int64_t epoch, int64_t step) const override;
  std::string describe() const override;

 private:
  std::vector<int64_t> boundaries_;
  std::vector<double> values_;
  ScheduleUnit unit_;
};

// TF polynomial decay (cycle = false):
//   c = min(counter, decay_steps); (initial - end) (1 - c / decay_steps)^power + end
class PolynomialDecay : public LrSchedule {
 public:
  PolynomialDecay(double initial, double end, int64_t decay_steps, double power = 1.0,
                  ScheduleUnit unit = ScheduleUnit::Step);
  double lr(int64_t epoch, int64_t step) const override;
  std::string describe() const override;

 private:
  double initial_, end_;
  int64_t decay_steps_;
  double power_;
  ScheduleUnit unit_;
};

// TF cosine decay: c = min(counter, decay_steps);
//   initial ((1 - alpha) 0.5 (1 + cos(pi c / decay_steps)) + alpha)
class CosineDecay : public LrSchedule {
 public:
  CosineDecay(double initial, int64_t decay_steps, double alpha = 0.0, ScheduleUnit unit = ScheduleUnit::Step);
  double lr(int64_t epoch, int64_t step) const override;
  std::string describe() const override;

 private:
  double initial_;
  int64_t decay_steps_;
  double alpha_;
  ScheduleUnit unit_;
};

struct PlateauOptions {
  enum class Mode { Min, Max };
  enum class ThresholdMode { Rel, Abs };
  Mode mode = Mode::Min;
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  int64_t cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;  // reductions smaller than this are ignored
};

// torch.optim.lr_scheduler.ReduceLROnPlateau over an inner schedule: after
// k reductions lr = max(inner * factor^k, min_lr) (k = 0: inner unchanged).
// Call on_epoch_end(metric) (or step(metric)) once per epoch.
class ReduceLROnPlateau : public LrSchedule {
 public:
  ReduceLROnPlateau(LrSchedulePtr inner, PlateauOptions opts = {});
  ReduceLROnPlateau(double lr, PlateauOptions opts = {});
  double lr(int64_t epoch, int64_t step) const override;
  std::string describe() const override;
  void on_epoch_end(double metric) override { step(metric); }
  // Returns true when this call reduced the learning rate.
  bool step(double metric);
  ScheduleState state() const override;
  void load_state(const ScheduleState& s) override;

  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t num_reductions() const { return num_reductions_; }
  double scale() const { return scale_; }

 private:
  bool is_better(double a) const;
  double reduced(double inner_lr, double scale, int64_t reductions) const;

  LrSchedulePtr inner_;
  PlateauOptions opts_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;  // number of step() calls
  int64_t num_reductions_ = 0;
  double scale_ = 1.0;
  // The (epoch, step) of the latest lr() query: the lr "in the optimizer",
  // against which step() applies torch's eps test. Not part of the state.
  mutable int64_t query_epoch_ = -1, query_step_ = 0;
};

}  // namespace mrmf
