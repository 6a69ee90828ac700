// Optimizer base: fused updates over a ParamStore's flat buffers.
//
// State tensors ("exp_avg", "momentum_buffer", ...) are flat buffers with the
// layout of store.values(): the state of a parameter lives at the parameter's
// offset, and the state of a group covers the same [begin, end) range as
// store.group_range(group). A step launches one fused kernel per contiguous
// run of trainable elements (normally a single launch over the whole buffer).
//
// Step counts are kept per group, as torch.optim keeps state['step'] per
// parameter: a group that was frozen for a while (torch: requires_grad=False,
// no state) resumes with its own count, and reset_group() starts it afresh --
// both matter for Adam's bias correction and SGD's first-step buffer.
//
// Frozen groups are neither updated nor decayed; their state is left alone.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "layers/context.h"
#include "layers/param_store.h"

namespace mrmf {

class Optimizer {
 public:
  // `store` must be finalized and must outlive the optimizer.
  explicit Optimizer(ParamStore& store);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string type() const = 0;

  // One update of every non-frozen group with learning rate `lr`, using store.grads().
  void step(Stream& stream, float lr);
  void step(Context& ctx, float lr) { step(ctx.stream(), lr); }

  // Zeroes all state and step counts (a fresh optimizer).
  void zero_state(Stream& stream = cpu_stream());
  // Zeroes the state and the step count of one group (e.g. after loading new weights into it).
  void reset_group(ParamGroup g, Stream& stream = cpu_stream());
  // Copies the state and step count of `g` from `src` (e.g. fusion: reuse the
  // bottom's Adam moments). Requires the same optimizer type and state names,
  // and the same parameter names and shapes in the group; otherwise throws
  // (kind Shape) listing the differences and copies nothing.
  void copy_group_state_from(const Optimizer& src, ParamGroup g, Stream& stream = cpu_stream());

  void freeze(ParamGroup g) { frozen_[idx(g)] = true; }
  void unfreeze(ParamGroup g) { frozen_[idx(g)] = false; }
  bool frozen(ParamGroup g) const { return frozen_[idx(g)]; }

  // Number of updates applied to the group so far (torch's state['step']).
  int64_t step_count(ParamGroup g) const { return steps_[idx(g)]; }
  void set_step_count(ParamGroup g, int64_t n);

  // Named flat state buffers (same layout as store.values()), for checkpoints.
  // The tensors alias the optimizer's state: copying into them restores it.
  const std::vector<std::pair<std::string, Tensor>>& state_tensors() const { return state_; }
  Tensor state(const std::string& name) const;  // throws naming the known states
  // The part of a state buffer that belongs to one parameter, shaped like it.
  Tensor state_of(const std::string& name, ParamId id) const;

  ParamStore& store() const { return *store_; }

 protected:
  // Allocates a zeroed flat state buffer; called by derived constructors.
  Tensor add_state(const std::string& name);
  // Updates elements [begin, end) of the flat buffers. `t` is the 1-based step
  // number of this update for every parameter in the range.
  virtual void update(Stream& stream, int64_t begin, int64_t end, float lr, int64_t t) = 0;

 private:
  static size_t idx(ParamGroup g) { return static_cast<size_t>(g); }
  // Contiguous element ranges of each group, computed from the entries (and
  // merged where adjacent), so groups need not be registered in order.
  struct Segment {
    int64_t begin, end;
    ParamGroup group;
  };

  ParamStore* store_;
  std::vector<Segment> segments_;  // sorted by begin, adjacent same-group runs merged
  std::vector<std::pair<std::string, Tensor>> state_;
  std::array<int64_t, 2> steps_{0, 0};
  std::array<bool, 2> frozen_{false, false};
};

}  // namespace mrmf
