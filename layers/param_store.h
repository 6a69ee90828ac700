// The parameter store: one flat buffer per model for parameters, one for
// their gradients, one for non-trainable buffers (BN running statistics).
//
// Every tensor a layer owns is a named view into those buffers, carrying the
// PyTorch `state_dict` name and layout (e.g. `conv1.weight` as [out, in, k...])
// and a group tag: `bottom` (convolutional part) or `top` (fully connected
// part). Fusion copies named blocks or whole groups between two models --
// possibly built for different input resolutions -- where shapes agree, and
// refuses with the names and shapes where they do not. Gradient averaging and
// the optimizers work on the flat buffers in one or a few calls.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace mrmf {

enum class ParamGroup : uint8_t { Bottom, Top };
const char* group_name(ParamGroup g);
ParamGroup parse_group(const std::string& s);  // "bottom" | "top"

enum class ParamKind : uint8_t { Param, Buffer };

using ParamId = int;

struct ParamInfo {
  std::string name;  // state_dict name, e.g. "conv1.weight", "bn.running_mean"
  Shape shape;
  ParamGroup group = ParamGroup::Bottom;
  ParamKind kind = ParamKind::Param;
  int64_t offset = 0;  // in elements, within the flat buffer of its kind
  int64_t numel() const { return shape.numel(); }
};

class ParamStore {
 public:
  // Element alignment of each view inside the flat buffer (64 bytes), so
  // vectorized kernels never straddle two parameters.
  static constexpr int64_t kAlign = 16;

  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;
  ParamStore(ParamStore&&) = default;
  ParamStore& operator=(ParamStore&&) = default;

  // ---- building (before finalize) ----
  ParamId add_param(const std::string& name, const Shape& shape, ParamGroup group);
  ParamId add_buffer(const std::string& name, const Shape& shape, ParamGroup group);
  // Allocates the flat buffers on `device` (values and buffers zeroed, grads zeroed).
  void finalize(Device device, Stream& stream = cpu_stream());
  bool finalized() const { return finalized_; }

  // ---- access ----
  const std::vector<ParamInfo>& entries() const { return entries_; }
  const ParamInfo& info(ParamId id) const;
  ParamId find(const std::string& name) const;  // -1 when absent
  ParamId at(const std::string& name) const;    // throws naming the missing key
  Tensor value(ParamId id) const;  // the parameter or buffer itself
  Tensor grad(ParamId id) const;   // parameters only
  Tensor values() const { return values_; }    // flat [num_param_elements]
  Tensor grads() const { return grads_; }      // flat, same layout as values()
  Tensor buffers() const { return buffers_; }  // flat non-trainable state
  Device device() const { return device_; }
  int64_t num_param_elements() const { return param_elems_; }
  int64_t num_parameters() const;  // sum of parameter numels (no padding) -- PyTorch's count
  // [begin, end) element range of a group within values(); groups are
  // contiguous when layers register bottom-first, which the models do.
  std::pair<int64_t, int64_t> group_range(ParamGroup g) const;

  // ---- copying between models ----
  // Copies the parameters and buffers named in `names` from `src`.
  // Every name must exist in both with equal shapes; otherwise nothing is
  // copied and the error lists each offending name with both shapes.
  void copy_from(const ParamStore& src, const std::vector<std::string>& names, Stream& stream = cpu_stream());
  // All parameters and buffers of a group (BN running statistics travel with their layer).
  void copy_group_from(const ParamStore& src, ParamGroup group, Stream& stream = cpu_stream());
  std::vector<std::string> names_in_group(ParamGroup g, bool include_buffers = true) const;

  // A digest of names, shapes and groups: equal on every rank of a job that
  // built the same model (checked at start-up to catch diverging ranks).
  uint64_t layout_hash() const;
  // A digest of every parameter's bytes (copied to the host where they
  // live on a device): equal on every rank that holds the same weights
  // (checked after each rank read a checkpoint of its own). Not the
  // buffers: a mid-epoch checkpoint restores each rank's own BN running
  // statistics.
  uint64_t values_digest(Stream& stream) const;

 private:
  ParamId add(const std::string& name, const Shape& shape, ParamGroup group, ParamKind kind);
  Tensor view_of(const Tensor& flat, const ParamInfo& p) const;

  std::vector<ParamInfo> entries_;
  std::unordered_map<std::string, ParamId> by_name_;
  int64_t param_elems_ = 0, buffer_elems_ = 0;
  bool finalized_ = false;
  Device device_;
  Tensor values_, grads_, buffers_;
};

}  // namespace mrmf
