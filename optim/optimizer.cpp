#include "optim/optimizer.h"

#include <algorithm>
#include <sstream>

namespace mrmf {

namespace {
int64_t padded(int64_t n) { return (n + ParamStore::kAlign - 1) / ParamStore::kAlign * ParamStore::kAlign; }
}  // namespace

Optimizer::Optimizer(ParamStore& store) : store_(&store) {
  MRMF_CHECK(store.finalized(), "optimizer constructed on a parameter store that is not finalized");
  std::vector<Segment> segs;
  for (const auto& p : store.entries())
    if (p.kind == ParamKind::Param)
      segs.push_back({p.offset, std::min(p.offset + padded(p.numel()), store.num_param_elements()), p.group});
  std::sort(segs.begin(), segs.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  for (const auto& s : segs) {
    if (!segments_.empty() && segments_.back().group == s.group && segments_.back().end == s.begin)
      segments_.back().end = s.end;
    else
      segments_.push_back(s);
  }
}

Tensor Optimizer::add_state(const std::string& name) {
  const int64_t n = store_->num_param_elements();
  // Never allocate zero bytes (a store without parameters); keep the logical size exact.
  Tensor t = Tensor::zeros({std::max<int64_t>(n, 1)}, DType::F32, store_->device()).narrow(0, 0, n);
  state_.emplace_back(name, t);
  return t;
}

void Optimizer::step(Stream& stream, float lr) {
  MRMF_CHECK_KIND(Device, stream.device() == store_->device(), type(), ": stream on ", stream.device().str(),
                  " but the parameters live on ", store_->device().str());
  // Runs of adjacent active segments whose groups are at the same step number
  // share one launch (the common case: everything in one launch).
  int64_t run_b = -1, run_e = -1, run_t = 0;
  auto flush = [&]() {
    if (run_b >= 0 && run_e > run_b) update(stream, run_b, run_e, lr, run_t);
    run_b = run_e = -1;
  };
  for (const auto& s : segments_) {
    if (frozen_[idx(s.group)]) {
      flush();
      continue;
    }
    const int64_t t = steps_[idx(s.group)] + 1;
    if (run_b >= 0 && run_e == s.begin && run_t == t) {
      run_e = s.end;
    } else {
      flush();
      run_b = s.begin;
      run_e = s.end;
      run_t = t;
    }
  }
  flush();
  for (size_t g = 0; g < 2; ++g)
    if (!frozen_[g]) ++steps_[g];
}

void Optimizer::zero_state(Stream& stream) {
  for (auto& st : state_) st.second.zero_(stream);
  steps_ = {0, 0};
}

void Optimizer::reset_group(ParamGroup g, Stream& stream) {
  for (const auto& s : segments_) {
    if (s.group != g) continue;
    for (auto& st : state_) st.second.narrow(0, s.begin, s.end - s.begin).zero_(stream);
  }
  steps_[idx(g)] = 0;
}

void Optimizer::copy_group_state_from(const Optimizer& src, ParamGroup g, Stream& stream) {
  std::ostringstream problems;
  int bad = 0;
  auto problem = [&](const std::string& what) {
    problems << "\n  " << what;
    ++bad;
  };
  if (src.type() != type()) problem("optimizer type " + src.type() + " (source) vs " + type() + " (destination)");
  std::vector<std::string> names, src_names;
  for (const auto& st : state_) names.push_back(st.first);
  for (const auto& st : src.state_) src_names.push_back(st.first);
  if (names != src_names && src.type() == type()) problem("different state buffers (e.g. momentum on one side only)");

  const auto dst_params = store_->names_in_group(g, /*include_buffers=*/false);
  const auto src_params = src.store_->names_in_group(g, /*include_buffers=*/false);
  if (dst_params != src_params)
    problem("different parameter lists in the group (" + std::to_string(src_params.size()) + " in the source, " +
            std::to_string(dst_params.size()) + " here)");
  for (const auto& n : dst_params) {
    const ParamId s = src.store_->find(n);
    if (s < 0) continue;
    const Shape& a = src.store_->info(s).shape;
    const Shape& b = store_->info(store_->at(n)).shape;
    if (a != b) problem("'" + n + "': source " + a.str() + " vs destination " + b.str());
  }
  MRMF_CHECK_KIND(Shape, bad == 0, "cannot copy ", type(), " state of group '", group_name(g), "':",
                  problems.str());

  // Per parameter: the two stores may place the group at different offsets.
  for (const auto& n : dst_params) {
    const ParamId d = store_->at(n), s = src.store_->at(n);
    for (size_t k = 0; k < state_.size(); ++k) {
      Tensor dst = state_[k].second.narrow(0, store_->info(d).offset, store_->info(d).numel());
      dst.copy_from(src.state_[k].second.narrow(0, src.store_->info(s).offset, src.store_->info(s).numel()), stream);
    }
  }
  steps_[idx(g)] = src.steps_[idx(g)];
}

void Optimizer::set_step_count(ParamGroup g, int64_t n) {
  MRMF_CHECK(n >= 0, type(), ": negative step count ", n);
  steps_[idx(g)] = n;
}

Tensor Optimizer::state(const std::string& name) const {
  std::string known;
  for (const auto& st : state_) {
    if (st.first == name) return st.second;
    known += (known.empty() ? "" : ", ") + st.first;
  }
  MRMF_THROW(Usage, type(), " has no state '", name, "' (it has: ", known.empty() ? "none" : known, ")");
}

Tensor Optimizer::state_of(const std::string& name, ParamId id) const {
  const ParamInfo& p = store_->info(id);
  MRMF_CHECK(p.kind == ParamKind::Param, "'", p.name, "' is a buffer and has no optimizer state");
  return state(name).narrow(0, p.offset, p.numel()).view(p.shape);
}

}  // namespace mrmf
