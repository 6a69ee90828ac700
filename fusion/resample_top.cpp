#include "fusion/resample_top.h"

#include <algorithm>
#include <cmath>

#include "fusion/fuse.h"

namespace mrmf {
namespace {

// What the layers before the Flatten do to a sample: its shape there, and
// where each spatial position lies in the input (see centre_map).
struct FeatureWalk {
  Shape s;                        // [1, C, P...]
  std::vector<CentreMap> centre;  // per spatial axis of the input
  std::string silent;             // the first layer that gave no centre map ("" = none)
};

// Walks `seq`: true, with w at the Flatten's input, when a Flatten is
// inside it (at any depth); otherwise w ends at seq's output.
bool walk_to_flatten(Sequential& seq, FeatureWalk& w) {
  for (size_t i = 0; i < seq.size(); ++i) {
    Module& c = seq.child(i);
    if (c.type() == "Flatten") return true;
    if (auto* inner = dynamic_cast<Sequential*>(&c)) {
      if (walk_to_flatten(*inner, w)) return true;
      continue;
    }
    for (size_t a = 0; a < w.centre.size() && w.silent.empty(); ++a) {
      if (const auto m = c.centre_map(static_cast<int>(a)))
        w.centre[a] = w.centre[a].then(*m);
      else
        w.silent = "'" + c.name() + "' (" + c.type() + ")";
    }
    w.s = c.output_shape(w.s);
  }
  return false;
}

FeatureWalk walk_features(Model& m) {
  std::vector<int64_t> dims = m.sample_shape().vec();
  dims.insert(dims.begin(), 1);
  FeatureWalk w{Shape(dims), std::vector<CentreMap>(dims.size() - 2), ""};
  MRMF_CHECK_KIND(Config, walk_to_flatten(m.net(), w), "model ", m.name(),
                  " has no Flatten layer: its top group cannot be resampled across resolutions");
  return w;
}

// [outer, n, inner] -> [outer, m, inner] along the middle axis, target d at
// source position at.scale * d + at.offset.
std::vector<float> resample_axis(const std::vector<float>& x, int64_t outer, int64_t n, int64_t m, int64_t inner,
                                 const CentreMap& at) {
  std::vector<float> y(static_cast<size_t>(outer * m * inner));
  for (int64_t d = 0; d < m; ++d) {
    const double pos = std::clamp(at.scale * double(d) + at.offset, 0.0, double(n - 1));
    const int64_t i0 = static_cast<int64_t>(std::floor(pos)), i1 = std::min(i0 + 1, n - 1);
    const float w = static_cast<float>(pos - double(i0));
    for (int64_t o = 0; o < outer; ++o) {
      const float* a = x.data() + (o * n + i0) * inner;
      const float* b = x.data() + (o * n + i1) * inner;
      float* out = y.data() + (o * m + d) * inner;
      for (int64_t k = 0; k < inner; ++k) out[k] = a[k] * (1.f - w) + b[k] * w;
    }
  }
  return y;
}

}  // namespace

Shape flattened_feature_shape(Model& m) {
  const std::vector<int64_t> v = walk_features(m).s.vec();
  return Shape(std::vector<int64_t>(v.begin() + 1, v.end()));
}

std::vector<CentreMap> flattened_feature_centres(Model& m) {
  const FeatureWalk w = walk_features(m);
  MRMF_CHECK_KIND(Config, w.silent.empty(), "model ", m.name(), ": layer ", w.silent,
                  " does not say where its output positions lie in its input (Module::centre_map), so the ",
                  "flattened features of two resolutions cannot be lined up");
  return w.centre;
}

std::vector<CentreMap> matching_positions(Model& coarse, Model& target) {
  const std::vector<CentreMap> c = flattened_feature_centres(coarse), t = flattened_feature_centres(target);
  const Shape ci = coarse.sample_shape(), ti = target.sample_shape();
  MRMF_CHECK_KIND(Shape, ci.ndim() == ti.ndim() && c.size() == t.size(), "MRT with a resampled top: inputs ", ci.str(),
                  " and ", ti.str(), " differ in rank");
  std::vector<CentreMap> at;
  for (size_t a = 0; a < c.size(); ++a) {
    const int64_t n = ci[static_cast<int>(a) + 1], N = ti[static_cast<int>(a) + 1];
    MRMF_CHECK_KIND(Shape, n > 0 && N % n == 0, "MRT with a resampled top: the target's input ", ti.str(),
                    " is not a whole multiple of the coarse model's ", ci.str(), " along spatial axis ", a,
                    ": the coarse input cannot be placed on it");
    // Coarse position x in the target's input coordinates: the block
    // average's map, then the coarse layers'; solve for the target's centre.
    const CentreMap src = window_centre_map(N / n, N / n, 0).then(c[a]);
    at.push_back({t[a].scale / src.scale, (t[a].offset - src.offset) / src.scale});
  }
  return at;
}

void resample_positions(const float* src, const Shape& from, float* dst, const Shape& to, int64_t outer, float scale,
                        const std::vector<CentreMap>& at) {
  MRMF_CHECK_KIND(Shape, from.ndim() == to.ndim() && from.ndim() >= 1 && from[0] == to[0],
                  "resample_positions: feature maps ", from.str(), " and ", to.str(),
                  " differ in rank or channel count");
  MRMF_CHECK_KIND(Shape, at.size() == static_cast<size_t>(from.ndim() - 1), "resample_positions: ", at.size(),
                  " position maps for the ", from.ndim() - 1, " spatial axes of ", from.str());
  // Refining only: to coarsen, linear point samples would skip source
  // positions (an area average would be needed), and MRT never coarsens.
  for (int a = 1; a < from.ndim(); ++a)
    MRMF_CHECK_KIND(Shape, to[a] >= from[a], "resample_positions: ", from.str(), " -> ", to.str(), " makes axis ", a,
                    " coarser; only refining is supported");
  std::vector<float> x(src, src + outer * from.numel());
  Shape cur = from;
  for (int a = 1; a < from.ndim(); ++a) {
    const CentreMap& m = at[static_cast<size_t>(a - 1)];
    if (cur[a] == to[a] && m.scale == 1.0 && m.offset == 0.0) continue;  // the identity
    int64_t before = outer;  // blocks of the axes in front of this one
    for (int k = 0; k < a; ++k) before *= cur[k];
    x = resample_axis(x, before, cur[a], to[a], cur.numel_from(a + 1), m);
    cur[a] = to[a];
  }
  for (size_t i = 0; i < x.size(); ++i) dst[i] = x[i] * scale;
}

std::unique_ptr<Model> transfer_resampled(Model& coarse, const ModelSpec& target_spec, Device device, uint64_t seed) {
  auto m = transfer_bottom(coarse, target_spec, device, seed);
  const Shape from = flattened_feature_shape(coarse), to = flattened_feature_shape(*m);
  MRMF_CHECK_KIND(Shape, from.ndim() == to.ndim() && from[0] == to[0], "MRT with a resampled top: the coarse model's ",
                  "flattened features ", from.str(), " and the target's ", to.str(),
                  " differ in rank or channel count");
  // Equal counts of another shape would let the first FC layer pass as an
  // equal-shaped entry, copied without being resampled.
  MRMF_CHECK_KIND(Shape, from == to || from.numel() != to.numel(), "MRT with a resampled top: the flattened features ",
                  from.str(), " and ", to.str(), " have the same size in another shape");
  const float scale = static_cast<float>(double(from.numel()) / double(to.numel()));
  // Equal maps (CosmoFlow 16^3 -> 32^3, where the coarse model's later pools
  // do not fit and are left out) are copied as they are, nothing resampled.
  const std::vector<CentreMap> at = from == to ? std::vector<CentreMap>{} : matching_positions(coarse, *m);
  const ParamStore& src = coarse.params();
  ParamStore& dst = m->params();
  std::vector<std::string> same;
  for (const ParamInfo& e : dst.entries()) {
    if (e.group != ParamGroup::Top) continue;
    const ParamId s = src.at(e.name);
    const Shape& ss = src.info(s).shape;
    if (ss == e.shape) {
      same.push_back(e.name);
      continue;
    }
    // Resolution-dependent: a weight [out, C * prod P] or a vector [C * prod P].
    const bool weight = e.shape.ndim() == 2 && ss.ndim() == 2 && ss[0] == e.shape[0] && ss[1] == from.numel() &&
                        e.shape[1] == to.numel();
    const bool vector = e.shape.ndim() == 1 && ss.ndim() == 1 && ss[0] == from.numel() && e.shape[0] == to.numel();
    MRMF_CHECK_KIND(Shape, weight || vector, "MRT with a resampled top: '", e.name, "' is ", ss.str(),
                    " in the coarse model and ", e.shape.str(), " in the target; only entries sized by the flattened ",
                    "features (", from.str(), " -> ", to.str(), ") can be resampled");
    const Tensor a = src.value(s).to(Device::cpu());
    Tensor b = Tensor::empty(e.shape);
    resample_positions(a.data<float>(), from, b.data<float>(), to, weight ? e.shape[0] : 1, weight ? scale : 1.f, at);
    dst.value(dst.at(e.name)).copy_from(b);
  }
  dst.copy_from(src, same);
  return m;
}

std::unique_ptr<Model> mrt_transfer(const std::string& mrt_top, Model& coarse, const ModelSpec& target_spec,
                                    Device device, uint64_t seed) {
  return mrt_top == "resample" ? transfer_resampled(coarse, target_spec, device, seed)
                               : transfer_bottom(coarse, target_spec, device, seed);
}

}  // namespace mrmf
