#include "layers/param_store.h"

#include <sstream>
#include <string_view>

#include "core/hash.h"

namespace mrmf {

const char* group_name(ParamGroup g) { return g == ParamGroup::Bottom ? "bottom" : "top"; }

ParamGroup parse_group(const std::string& s) {
  if (s == "bottom") return ParamGroup::Bottom;
  if (s == "top") return ParamGroup::Top;
  MRMF_THROW(Usage, "unknown parameter group '", s, "': expected bottom or top");
}

ParamId ParamStore::add(const std::string& name, const Shape& shape, ParamGroup group, ParamKind kind) {
  MRMF_CHECK(!finalized_, "parameter '", name, "' registered after the store was finalized");
  MRMF_CHECK(!name.empty(), "parameter with an empty name");
  MRMF_CHECK(by_name_.count(name) == 0, "parameter '", name, "' registered twice");
  ParamInfo p;
  p.name = name;
  p.shape = shape;
  p.group = group;
  p.kind = kind;
  int64_t& cursor = kind == ParamKind::Param ? param_elems_ : buffer_elems_;
  p.offset = cursor;
  cursor += (shape.numel() + kAlign - 1) / kAlign * kAlign;
  entries_.push_back(p);
  const ParamId id = static_cast<ParamId>(entries_.size() - 1);
  by_name_[name] = id;
  return id;
}

ParamId ParamStore::add_param(const std::string& name, const Shape& shape, ParamGroup group) {
  return add(name, shape, group, ParamKind::Param);
}
ParamId ParamStore::add_buffer(const std::string& name, const Shape& shape, ParamGroup group) {
  return add(name, shape, group, ParamKind::Buffer);
}

void ParamStore::finalize(Device device, Stream& stream) {
  MRMF_CHECK(!finalized_, "parameter store finalized twice");
  device_ = device;
  // Never allocate zero bytes: a model without buffers still gets a valid (1-element) tensor.
  values_ = Tensor::zeros({std::max<int64_t>(param_elems_, 1)}, DType::F32, device, stream).narrow(0, 0, param_elems_);
  grads_ = Tensor::zeros({std::max<int64_t>(param_elems_, 1)}, DType::F32, device, stream).narrow(0, 0, param_elems_);
  buffers_ =
      Tensor::zeros({std::max<int64_t>(buffer_elems_, 1)}, DType::F32, device, stream).narrow(0, 0, buffer_elems_);
  finalized_ = true;
}

const ParamInfo& ParamStore::info(ParamId id) const {
  MRMF_CHECK(id >= 0 && id < static_cast<ParamId>(entries_.size()), "parameter id ", id, " out of range");
  return entries_[static_cast<size_t>(id)];
}

ParamId ParamStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

ParamId ParamStore::at(const std::string& name) const {
  const ParamId id = find(name);
  MRMF_CHECK_KIND(Shape, id >= 0, "no parameter or buffer named '", name, "'");
  return id;
}

Tensor ParamStore::view_of(const Tensor& flat, const ParamInfo& p) const {
  MRMF_CHECK(finalized_, "parameter '", p.name, "' accessed before the store was finalized");
  return flat.narrow(0, p.offset, p.numel()).view(p.shape);
}

Tensor ParamStore::value(ParamId id) const {
  const ParamInfo& p = info(id);
  return view_of(p.kind == ParamKind::Param ? values_ : buffers_, p);
}

Tensor ParamStore::grad(ParamId id) const {
  const ParamInfo& p = info(id);
  MRMF_CHECK(p.kind == ParamKind::Param, "'", p.name, "' is a buffer and has no gradient");
  return view_of(grads_, p);
}

int64_t ParamStore::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : entries_)
    if (p.kind == ParamKind::Param) n += p.numel();
  return n;
}

std::pair<int64_t, int64_t> ParamStore::group_range(ParamGroup g) const {
  int64_t b = -1, e = -1;
  for (const auto& p : entries_) {
    if (p.kind != ParamKind::Param || p.group != g) continue;
    if (b < 0) b = p.offset;
    e = p.offset + (p.numel() + kAlign - 1) / kAlign * kAlign;
  }
  if (b < 0) return {0, 0};
  if (e > param_elems_) e = param_elems_;
  return {b, e};
}

std::vector<std::string> ParamStore::names_in_group(ParamGroup g, bool include_buffers) const {
  std::vector<std::string> out;
  for (const auto& p : entries_)
    if (p.group == g && (include_buffers || p.kind == ParamKind::Param)) out.push_back(p.name);
  return out;
}

void ParamStore::copy_from(const ParamStore& src, const std::vector<std::string>& names, Stream& stream) {
  MRMF_CHECK(finalized_ && src.finalized_, "copy between parameter stores before both are finalized");
  // Validate everything first: a partial copy would leave a half-fused model.
  std::ostringstream problems;
  int bad = 0;
  for (const auto& n : names) {
    const ParamId s = src.find(n), d = find(n);
    if (s < 0 || d < 0) {
      problems << "\n  '" << n << "': " << (s < 0 ? "missing in source" : "missing in destination");
      ++bad;
    } else if (src.info(s).shape != info(d).shape || src.info(s).kind != info(d).kind) {
      problems << "\n  '" << n << "': source " << src.info(s).shape.str() << " vs destination " << info(d).shape.str();
      ++bad;
    }
  }
  MRMF_CHECK_KIND(Shape, bad == 0, "cannot copy ", bad, " of ", names.size(), " parameter blocks:", problems.str());
  for (const auto& n : names) value(at(n)).copy_from(src.value(src.at(n)), stream);
}

void ParamStore::copy_group_from(const ParamStore& src, ParamGroup group, Stream& stream) {
  const auto names = names_in_group(group);
  const auto src_names = src.names_in_group(group);
  MRMF_CHECK_KIND(Shape, names == src_names, "cannot copy group '", group_name(group),
                  "': the two models have different parameter lists (", src_names.size(), " vs ", names.size(), ")");
  copy_from(src, names, stream);
}

uint64_t ParamStore::values_digest(Stream& stream) const {
  uint64_t h = 1469598103934665603ull;
  if (!values_.defined() || values_.numel() == 0) return h;
  const Tensor host = values_.to(Device::cpu(), stream);
  stream.synchronize();
  return fnv1a64(std::string_view(static_cast<const char*>(host.raw_data()), static_cast<size_t>(host.nbytes())), h);
}

uint64_t ParamStore::layout_hash() const {
  // FNV-1a over names, shapes, groups and kinds.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& p : entries_) {
    mix(p.name.data(), p.name.size());
    for (int i = 0; i < p.shape.ndim(); ++i) {
      const int64_t d = p.shape[i];
      mix(&d, sizeof d);
    }
    const uint8_t tag[2] = {static_cast<uint8_t>(p.group), static_cast<uint8_t>(p.kind)};
    mix(tag, 2);
  }
  return h;
}

}  // namespace mrmf
