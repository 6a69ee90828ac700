#include "layers/module.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/philox.h"

namespace mrmf {

void check_input(const Module& m, const Tensor& x, int ndim, int64_t channels, const char* layout) {
  MRMF_CHECK_KIND(Shape, x.ndim() == ndim && (channels < 0 || x.size(1) == channels), m.type(), " '", m.name(),
                  "': expected input ", layout, (channels >= 0 ? " with C = " + std::to_string(channels) : ""),
                  ", got ", x.shape().str());
}

// ---------------------------------------------------------------- layer profile
// MRMF_PROFILE_LAYERS=1: every Sequential times each child's forward and
// backward (stream-synchronized, so GPU times are real too) and the totals
// are printed to stderr at exit, largest first. Off: one cached branch per child.
namespace {
struct LayerProfile {
  struct Row {
    double fwd = 0, bwd = 0;
    int64_t calls = 0;
  };
  std::mutex mu;
  std::map<std::string, Row> rows;
  static bool enabled() {
    static const bool on = [] {
      const char* e = std::getenv("MRMF_PROFILE_LAYERS");
      return e && *e && std::string(e) != "0";
    }();
    return on;
  }
  void add(const std::string& name, bool fwd, double s) {
    std::lock_guard<std::mutex> lk(mu);
    Row& r = rows[name];
    (fwd ? r.fwd : r.bwd) += s;
    if (fwd) ++r.calls;
  }
  ~LayerProfile() {
    if (rows.empty()) return;
    std::vector<std::pair<std::string, Row>> v(rows.begin(), rows.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.fwd + a.second.bwd > b.second.fwd + b.second.bwd; });
    std::fprintf(stderr, "\n%-44s %8s %12s %12s\n", "layer (MRMF_PROFILE_LAYERS)", "calls", "fwd ms/call", "bwd ms/call");
    for (auto& [name, r] : v)
      std::fprintf(stderr, "%-44s %8lld %12.2f %12.2f\n", name.c_str(), static_cast<long long>(r.calls),
                   1e3 * r.fwd / std::max<int64_t>(r.calls, 1), 1e3 * r.bwd / std::max<int64_t>(r.calls, 1));
  }
};
LayerProfile& layer_profile() {
  static LayerProfile p;
  return p;
}
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

// ---------------------------------------------------------------- Sequential
void Sequential::add_module(const std::string& name, std::unique_ptr<Module> m, ParamGroup group) {
  m->set_name(name.empty() ? std::to_string(children_.size()) : name);
  children_.push_back({std::move(m), group});
}

void Sequential::register_params(ParamStore& store, const std::string& prefix, ParamGroup) {
  store_ = &store;
  for (auto& c : children_) c.module->register_params(store, prefix + c.module->name() + ".", c.group);
}

void Sequential::init_params(uint64_t seed, InitScheme scheme) {
  for (auto& c : children_) c.module->init_params(seed, scheme);
}

Shape Sequential::output_shape(const Shape& in) const {
  Shape s = in;
  for (const auto& c : children_) s = c.module->output_shape(s);
  return s;
}

Tensor Sequential::forward(Context& ctx, const Tensor& x) {
  tape_.clear();
  Tensor h = x;
  const bool prof = LayerProfile::enabled();
  for (auto& c : children_) {
    const double t0 = prof ? now_s() : 0;
    h = c.module->forward(ctx, h);
    if (prof && c.module->type() != "Sequential") {
      ctx.stream().synchronize();
      layer_profile().add(name() + "." + c.module->name() + " " + c.module->type(), true, now_s() - t0);
    }
    tape_.push_back(c.module.get());
  }
  return h;
}

Tensor Sequential::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  MRMF_CHECK(!tape_.empty() || children_.empty(), "Sequential '", name(), "': backward without a forward pass");
  Tensor g = dy;
  const bool prof = LayerProfile::enabled();
  for (size_t i = tape_.size(); i-- > 0;) {
    const double t0 = prof ? now_s() : 0;
    g = tape_[i]->backward(ctx, g, need_dx || i > 0);
    if (prof && tape_[i]->type() != "Sequential") {
      ctx.stream().synchronize();
      layer_profile().add(name() + "." + tape_[i]->name() + " " + tape_[i]->type(), false, now_s() - t0);
    }
    if (backward_hook_) backward_hook_(*tape_[i]);
  }
  tape_.clear();
  return g;
}

void Sequential::clear_saved() {
  for (auto& c : children_) c.module->clear_saved();
  tape_.clear();
}

// ---------------------------------------------------------------- Model
Model::Model(std::string name, Shape sample_shape) : name_(std::move(name)), sample_shape_(sample_shape) {
  net_.set_name(name_);
}

void Model::build(Device device, uint64_t seed, InitScheme scheme) {
  MRMF_CHECK(!store_.finalized(), "model '", name_, "' built twice");
  // Register child by child to learn which parameters each top-level module
  // owns (the trainer's gradient buckets follow backward's module order).
  net_.register_params(store_, "", ParamGroup::Bottom);
  {
    // Offsets are assigned in registration order, so a module's first
    // parameter is the first entry whose name starts with its prefix.
    for (size_t i = 0; i < net_.size(); ++i) {
      const std::string prefix = net_.child(i).name() + ".";
      int64_t first = -1;
      for (const auto& e : store_.entries())
        if (e.kind == ParamKind::Param && e.name.rfind(prefix, 0) == 0) {
          first = e.offset;
          break;
        }
      first_offset_[&net_.child(i)] = first;
    }
  }
  store_.finalize(device);
  net_.init_params(seed, scheme);
}

int64_t Model::first_param_offset(const Module& m) const {
  auto it = first_offset_.find(&m);
  return it == first_offset_.end() ? -1 : it->second;
}

Shape Model::output_shape(int64_t batch) const {
  std::vector<int64_t> d{batch};
  for (int i = 0; i < sample_shape_.ndim(); ++i) d.push_back(sample_shape_[i]);
  return net_.output_shape(Shape(d));
}

Tensor Model::forward(Context& ctx, const Tensor& x) {
  MRMF_CHECK(built(), "model '", name_, "' used before build()");
  MRMF_CHECK_KIND(Device, x.device() == store_.device(), "model '", name_, "' lives on ", store_.device().str(),
                  " but its input ", x.str(), " does not");
  return net_.forward(ctx, x);
}

void Model::backward(Context& ctx, const Tensor& dy) { net_.backward(ctx, dy, /*need_dx=*/false); }

// ---------------------------------------------------------------- init
void init_uniform(const Tensor& t, float bound, uint64_t seed, uint64_t stream_id) {
  // Initialization runs on the host and is copied over: it happens once per model.
  Tensor host = Tensor::empty(t.shape());
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i)
    p[i] = (2.f * kernels::philox_uniform(seed, stream_id, static_cast<uint64_t>(i)) - 1.f) * bound;
  Tensor dst = t;
  dst.copy_from(host);
}

float pytorch_default_bound(int64_t fan_in) { return fan_in > 0 ? 1.f / std::sqrt(static_cast<float>(fan_in)) : 0.f; }

float glorot_bound(int64_t fan_in, int64_t fan_out) {
  return std::sqrt(6.f / static_cast<float>(fan_in + fan_out));
}

}  // namespace mrmf
