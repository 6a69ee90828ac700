#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace mrmf {

namespace {
int64_t counter(ScheduleUnit u, int64_t epoch, int64_t step) { return u == ScheduleUnit::Epoch ? epoch : step; }
const char* unit_name(ScheduleUnit u) { return u == ScheduleUnit::Epoch ? "epochs" : "steps"; }

// Prefixes / strips "inner." so nested schedules keep distinct keys.
ScheduleState nest(const ScheduleState& inner) {
  ScheduleState out;
  for (const auto& kv : inner) out["inner." + kv.first] = kv.second;
  return out;
}
ScheduleState unnest(const ScheduleState& s) {
  ScheduleState out;
  for (const auto& kv : s)
    if (kv.first.rfind("inner.", 0) == 0) out[kv.first.substr(6)] = kv.second;
  return out;
}
double get(const ScheduleState& s, const char* key) {
  auto it = s.find(key);
  MRMF_CHECK_KIND(Config, it != s.end(), "learning-rate schedule state lacks '", key, "'");
  return it->second;
}
}  // namespace

// ---------------------------------------------------------------- ConstantLr
ConstantLr::ConstantLr(double lr) : lr_(lr) {
  MRMF_CHECK_KIND(Config, lr >= 0.0, "learning rate must be >= 0, got ", lr);
}
std::string ConstantLr::describe() const { return detail::concat("constant(", lr_, ")"); }

// ---------------------------------------------------------------- LinearWarmup
LinearWarmup::LinearWarmup(int64_t warmup, ScheduleUnit unit, LrSchedulePtr inner)
    : warmup_(warmup), unit_(unit), inner_(std::move(inner)) {
  MRMF_CHECK_KIND(Config, warmup >= 0, "warmup length must be >= 0, got ", warmup);
  MRMF_CHECK(inner_ != nullptr, "LinearWarmup needs an inner schedule");
}

double LinearWarmup::lr(int64_t epoch, int64_t step) const {
  const double base = inner_->lr(epoch, step);
  const int64_t c = counter(unit_, epoch, step);
  return c < warmup_ ? base * static_cast<double>(c + 1) / static_cast<double>(warmup_) : base;
}

std::string LinearWarmup::describe() const {
  return detail::concat("linear warmup over ", warmup_, " ", unit_name(unit_), " of ", inner_->describe());
}
ScheduleState LinearWarmup::state() const { return nest(inner_->state()); }
void LinearWarmup::load_state(const ScheduleState& s) { inner_->load_state(unnest(s)); }

// ---------------------------------------------------------------- PiecewiseConstant
PiecewiseConstant::PiecewiseConstant(std::vector<int64_t> boundaries, std::vector<double> values, ScheduleUnit unit)
    : boundaries_(std::move(boundaries)), values_(std::move(values)), unit_(unit) {
  MRMF_CHECK_KIND(Config, values_.size() == boundaries_.size() + 1, "piecewise-constant schedule: ",
                  boundaries_.size(), " boundaries need ", boundaries_.size() + 1, " values, got ", values_.size());
  for (size_t i = 1; i < boundaries_.size(); ++i)
    MRMF_CHECK_KIND(Config, boundaries_[i] > boundaries_[i - 1],
                    "piecewise-constant schedule: boundaries must increase, got ", boundaries_[i - 1], " then ",
                    boundaries_[i]);
}

double PiecewiseConstant::lr(int64_t epoch, int64_t step) const {
  const int64_t c = counter(unit_, epoch, step);
  // first boundary >= c: counters up to and including a boundary keep the earlier value (TF).
  const size_t k = static_cast<size_t>(std::lower_bound(boundaries_.begin(), boundaries_.end(), c) - boundaries_.begin());
  return values_[k];
}

std::string PiecewiseConstant::describe() const {
  std::ostringstream os;
  os << "piecewise constant (" << unit_name(unit_) << "): " << values_[0];
  for (size_t i = 0; i < boundaries_.size(); ++i) os << " | " << boundaries_[i] << " | " << values_[i + 1];
  return os.str();
}

// ---------------------------------------------------------------- PolynomialDecay
PolynomialDecay::PolynomialDecay(double initial, double end, int64_t decay_steps, double power, ScheduleUnit unit)
    : initial_(initial), end_(end), decay_steps_(decay_steps), power_(power), unit_(unit) {
  MRMF_CHECK_KIND(Config, decay_steps > 0, "polynomial decay: decay_steps must be > 0, got ", decay_steps);
}

double PolynomialDecay::lr(int64_t epoch, int64_t step) const {
  const double c = static_cast<double>(std::min(counter(unit_, epoch, step), decay_steps_));
  return (initial_ - end_) * std::pow(1.0 - c / static_cast<double>(decay_steps_), power_) + end_;
}

std::string PolynomialDecay::describe() const {
  return detail::concat("polynomial decay ", initial_, " -> ", end_, " over ", decay_steps_, " ", unit_name(unit_),
                        " (power ", power_, ")");
}

// ---------------------------------------------------------------- CosineDecay
CosineDecay::CosineDecay(double initial, int64_t decay_steps, double alpha, ScheduleUnit unit)
    : initial_(initial), decay_steps_(decay_steps), alpha_(alpha), unit_(unit) {
  MRMF_CHECK_KIND(Config, decay_steps > 0, "cosine decay: decay_steps must be > 0, got ", decay_steps);
}

double CosineDecay::lr(int64_t epoch, int64_t step) const {
  const double c = static_cast<double>(std::min(counter(unit_, epoch, step), decay_steps_));
  const double pi = 3.14159265358979323846;
  const double cosine = 0.5 * (1.0 + std::cos(pi * c / static_cast<double>(decay_steps_)));
  return initial_ * ((1.0 - alpha_) * cosine + alpha_);
}

std::string CosineDecay::describe() const {
  return detail::concat("cosine decay from ", initial_, " over ", decay_steps_, " ", unit_name(unit_), " (alpha ",
                        alpha_, ")");
}

// ---------------------------------------------------------------- ReduceLROnPlateau
ReduceLROnPlateau::ReduceLROnPlateau(LrSchedulePtr inner, PlateauOptions opts)
    : inner_(std::move(inner)), opts_(opts) {
  MRMF_CHECK(inner_ != nullptr, "ReduceLROnPlateau needs an inner schedule");
  MRMF_CHECK_KIND(Config, opts.factor < 1.0 && opts.factor >= 0.0, "ReduceLROnPlateau: factor must be in [0, 1), got ",
                  opts.factor);
  MRMF_CHECK_KIND(Config, opts.patience >= 0 && opts.cooldown >= 0,
                  "ReduceLROnPlateau: patience and cooldown must be >= 0");
  best_ = opts_.mode == PlateauOptions::Mode::Min ? std::numeric_limits<double>::infinity()
                                                  : -std::numeric_limits<double>::infinity();
}

ReduceLROnPlateau::ReduceLROnPlateau(double lr, PlateauOptions opts)
    : ReduceLROnPlateau(std::make_unique<ConstantLr>(lr), opts) {}

double ReduceLROnPlateau::reduced(double inner_lr, double scale, int64_t reductions) const {
  return reductions == 0 ? inner_lr : std::max(inner_lr * scale, opts_.min_lr);
}

double ReduceLROnPlateau::lr(int64_t epoch, int64_t step) const {
  query_epoch_ = epoch;
  query_step_ = step;
  return reduced(inner_->lr(epoch, step), scale_, num_reductions_);
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = opts_.threshold_mode == PlateauOptions::ThresholdMode::Rel;
  if (opts_.mode == PlateauOptions::Mode::Min)
    return rel ? a < best_ * (1.0 - opts_.threshold) : a < best_ - opts_.threshold;
  return rel ? a > best_ * (1.0 + opts_.threshold) : a > best_ + opts_.threshold;
}

// Mirrors torch.optim.lr_scheduler.ReduceLROnPlateau.step.
bool ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs during cooldown are ignored
  }
  bool changed = false;
  if (num_bad_epochs_ > opts_.patience) {
    const int64_t e = query_epoch_ >= 0 ? query_epoch_ : last_epoch_;
    const double base = inner_->lr(e, query_step_);
    const double old_lr = reduced(base, scale_, num_reductions_);
    const double new_lr = reduced(base, scale_ * opts_.factor, num_reductions_ + 1);
    if (old_lr - new_lr > opts_.eps) {  // torch skips negligible reductions (e.g. already at min_lr)
      scale_ *= opts_.factor;
      ++num_reductions_;
      changed = true;
    }
    cooldown_counter_ = opts_.cooldown;
    num_bad_epochs_ = 0;
  }
  return changed;
}

std::string ReduceLROnPlateau::describe() const {
  return detail::concat("reduce on plateau (factor ", opts_.factor, ", patience ", opts_.patience, ", cooldown ",
                        opts_.cooldown, ", min_lr ", opts_.min_lr, ") of ", inner_->describe());
}

ScheduleState ReduceLROnPlateau::state() const {
  ScheduleState s = nest(inner_->state());
  s["best"] = best_;
  s["num_bad_epochs"] = static_cast<double>(num_bad_epochs_);
  s["cooldown_counter"] = static_cast<double>(cooldown_counter_);
  s["last_epoch"] = static_cast<double>(last_epoch_);
  s["num_reductions"] = static_cast<double>(num_reductions_);
  s["scale"] = scale_;
  return s;
}

void ReduceLROnPlateau::load_state(const ScheduleState& s) {
  // Counts as whole numbers in int64's exact range (1e300 cast to int64 is
  // undefined), the scale a product of factors in (0, 1] (-1 gave lr 0).
  const auto count = [&](const char* key) {
    const double v = get(s, key);
    MRMF_CHECK_KIND(Data, v >= 0 && v <= 9007199254740992.0 && v == std::floor(v), "'", key, "' is ", v,
                    ", expected a count (a whole number >= 0)");
    return static_cast<int64_t>(v);
  };
  best_ = get(s, "best");
  MRMF_CHECK_KIND(Data, !std::isnan(best_), "'best' is NaN");
  num_bad_epochs_ = count("num_bad_epochs");
  cooldown_counter_ = count("cooldown_counter");
  last_epoch_ = count("last_epoch");
  num_reductions_ = count("num_reductions");
  scale_ = get(s, "scale");
  MRMF_CHECK_KIND(Data, scale_ > 0 && scale_ <= 1, "'scale' is ", scale_, ", expected a factor in (0, 1]");
  inner_->load_state(unnest(s));
}

}  // namespace mrmf
