#include "fusion/resample_top.h"

#include <algorithm>
#include <cmath>

#include "fusion/fuse.h"

namespace mrmf {
namespace {

// Walks `seq` from the input shape `s`: true, with s the Flatten's input,
// when a Flatten is inside it (at any depth); otherwise s ends as seq's output.
bool walk_to_flatten(Sequential& seq, Shape& s) {
  for (size_t i = 0; i < seq.size(); ++i) {
    Module& c = seq.child(i);
    if (c.type() == "Flatten") return true;
    if (auto* inner = dynamic_cast<Sequential*>(&c)) {
      if (walk_to_flatten(*inner, s)) return true;
      continue;
    }
    s = c.output_shape(s);
  }
  return false;
}

// [outer, n, inner] -> [outer, m, inner] along the middle axis.
std::vector<float> resample_axis(const std::vector<float>& x, int64_t outer, int64_t n, int64_t m, int64_t inner) {
  std::vector<float> y(static_cast<size_t>(outer * m * inner));
  for (int64_t d = 0; d < m; ++d) {
    const double pos = std::clamp((d + 0.5) * double(n) / double(m) - 0.5, 0.0, double(n - 1));
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
  std::vector<int64_t> dims = m.sample_shape().vec();
  dims.insert(dims.begin(), 1);
  Shape s(dims);
  MRMF_CHECK_KIND(Config, walk_to_flatten(m.net(), s), "model ", m.name(),
                  " has no Flatten layer: its top group cannot be resampled across resolutions");
  const std::vector<int64_t> v = s.vec();
  return Shape(std::vector<int64_t>(v.begin() + 1, v.end()));
}

void resample_positions(const float* src, const Shape& from, float* dst, const Shape& to, int64_t outer, float scale) {
  MRMF_CHECK_KIND(Shape, from.ndim() == to.ndim() && from.ndim() >= 1 && from[0] == to[0],
                  "resample_positions: feature maps ", from.str(), " and ", to.str(),
                  " differ in rank or channel count");
  // Refining only: to coarsen, linear point samples would skip source
  // positions (an area average would be needed), and MRT never coarsens.
  for (int a = 1; a < from.ndim(); ++a)
    MRMF_CHECK_KIND(Shape, to[a] >= from[a], "resample_positions: ", from.str(), " -> ", to.str(), " makes axis ", a,
                    " coarser; only refining is supported");
  std::vector<float> x(src, src + outer * from.numel());
  Shape cur = from;
  for (int a = 1; a < from.ndim(); ++a) {
    if (cur[a] == to[a]) continue;
    int64_t before = outer;  // blocks of the axes in front of this one
    for (int k = 0; k < a; ++k) before *= cur[k];
    x = resample_axis(x, before, cur[a], to[a], cur.numel_from(a + 1));
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
    resample_positions(a.data<float>(), from, b.data<float>(), to, weight ? e.shape[0] : 1, weight ? scale : 1.f);
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
