#include "fusion/fuse.h"

namespace mrmf {
namespace {
std::unique_ptr<Model> fresh(const ModelSpec& spec, Device device, uint64_t seed) {
  auto m = build_model(spec);
  m->build(device, seed, default_init_scheme(spec));
  return m;
}
}  // namespace

std::unique_ptr<Model> fuse_models(const Model& coarse, const Model& dense, const ModelSpec& dense_spec, Device device,
                                   uint64_t seed) {
  MRMF_CHECK_KIND(Shape, dense.sample_shape() == dense_spec.sample_shape, "fusion: the dense model's input ",
                  dense.sample_shape().str(), " is not the fused model's ", dense_spec.sample_shape.str());
  auto fused = fresh(dense_spec, device, seed);
  fused->params().copy_group_from(dense.params(), ParamGroup::Top);
  fused->params().copy_group_from(coarse.params(), ParamGroup::Bottom);
  return fused;
}

std::unique_ptr<Model> transfer_bottom(const Model& coarse, const ModelSpec& target_spec, Device device,
                                       uint64_t seed) {
  auto m = fresh(target_spec, device, seed);
  m->params().copy_group_from(coarse.params(), ParamGroup::Bottom);
  return m;
}

std::unique_ptr<Model> clone_model(const Model& src, const ModelSpec& spec, Device device) {
  auto m = fresh(spec, device, 0);
  m->params().values().copy_from(src.params().values());
  m->params().buffers().copy_from(src.params().buffers());
  return m;
}

}  // namespace mrmf
