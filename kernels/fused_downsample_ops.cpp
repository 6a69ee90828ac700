// CPU instantiation of the fused raw-data downsample, plus the public checked
// entry points that dispatch to either backend.
#define MRMF_BACKEND_NS cpu
#define MRMF_FUSED_RUN_ELSEWHERE  // the kernels: fused_downsample_cpu_*.cpp, one stored type each
#include "kernels/launch_cpu.h"
#include "kernels/fused_downsample_ops.inl"

#include <algorithm>

namespace mrmf::kernels {

namespace {
template <RawType R>
const float* log1p_table_of() {
  static const std::vector<float> table = [] {
    std::vector<float> t(size_t(1) << 16);
    for (uint32_t b = 0; b < t.size(); ++b) t[b] = log1p_f32(RawLoad<R>::from_bits(b));
    return t;
  }();
  return table.data();
}
}  // namespace

void set_cpu_rows_geometry(FusedGeom& g, RawType r, int threads) {
  // When no level averages along axis 1 (block 1 there), each row continues
  // into the next one in memory, input and outputs alike, and the blocks
  // never straddle two rows: the (s1, s2) plane is then one long row (the
  // sums and their order are unchanged). Longer vector loops, and the row
  // set-up paid once per plane; the 1/1 conversion of a 128^3 cube otherwise
  // runs 128-element rows.
  if (g.block[1] == 1 && g.in[1] > 1) {
    g.in[2] *= g.in[1];
    g.nblk[2] *= g.nblk[1];
    for (int l = 0; l < g.levels; ++l) {
      g.out[l][2] *= g.out[l][1];
      g.out[l][1] = 1;
    }
    g.in[1] = g.nblk[1] = 1;
    g.s[1] = g.in[2] * g.s[2];
  }
  g.chunk = g.nblk[2];  // whole rows per call: index math once per row
  // Slabs of group1 blocks along axis 1 per call (see row_cpu): as many as
  // keep a slab's input and outputs within kSlabBytes. Measured on 128^3 cubes (2-core
  // EPYC, 1 MB L2): 64 KB slabs 20-40 % slower than 512 KB-4 MB ones, which
  // are alike -- long input streams matter more than L2 residency. (With the
  // levels advancing plane by plane, session 17: 256 KB 14 % slower, 2-4 MB
  // 1-3 % slower for three levels.)
  constexpr int64_t kSlabBytes = 1 << 20;
  const int64_t plane_row = g.block[0] * g.block[1] * g.in[2] * g.c;  // input elements per block along axis 1
  double per_block = double(plane_row) * (r == RawType::F32 ? 4 : 2);
  for (int l = 0; l < g.levels; ++l) per_block += 4.0 * plane_row / double(g.f[l][0] * g.f[l][1] * g.f[l][2]);
  g.group1 = std::max<int64_t>(1, std::min<int64_t>(g.nblk[1], static_cast<int64_t>(kSlabBytes / per_block)));
  // ... but no fewer calls than 4 per thread where the blocks allow it (one
  // 2-D sample has a single block along axis 0: its slabs are all the work).
  const int64_t outer = g.n * g.nblk[0], want = 4 * static_cast<int64_t>(threads);
  if (outer * ((g.nblk[1] + g.group1 - 1) / g.group1) < want)
    g.group1 = std::max<int64_t>(1, std::min(g.group1, g.nblk[1] * outer / want));
}

const float* log1p_table(RawType r) {
  switch (r) {
    case RawType::U16: return log1p_table_of<RawType::U16>();
    case RawType::I16: return log1p_table_of<RawType::I16>();
    case RawType::F16: return log1p_table_of<RawType::F16>();
    case RawType::F32: break;
  }
  return nullptr;
}

RawType raw_type_of(DType dt, const std::string& who) {
  switch (dt) {
    case DType::U16: return RawType::U16;
    case DType::I16: return RawType::I16;
    case DType::F16: return RawType::F16;
    case DType::F32: return RawType::F32;
    default: break;
  }
  MRMF_THROW(Shape, who, ": unsupported raw element type ", dtype_name(dt),
             " (expected uint16, int16, float16 or float32)");
}

FusedGeom make_fused_geom(const Shape& x, const FusedDownsampleSpec& spec, const std::string& who) {
  const int k = x.ndim() - 2;
  MRMF_CHECK_KIND(Shape, k >= 1 && k <= 3, who, ": input ", x.str(), " must have 1 to 3 spatial axes plus N and C");
  const bool last = spec.layout == InputLayout::ChannelsLast;
  FusedGeom g;
  g.n = x[0];
  g.c = last ? x[-1] : x[1];
  MRMF_CHECK_KIND(Shape, g.c >= 1 && g.c <= kFusedMaxChannels, who, ": ", g.c, " channels, at most ", kFusedMaxChannels,
                  " supported");
  for (int d = 0; d < k; ++d) g.in[3 - k + d] = x[last ? 1 + d : 2 + d];
  // Input strides in elements.
  if (last) {
    g.s_c = 1;
    g.s[2] = g.c;
    g.s[1] = g.in[2] * g.c;
    g.s[0] = g.in[1] * g.in[2] * g.c;
    g.s_n = g.in[0] * g.s[0];
  } else {
    g.s[2] = 1;
    g.s[1] = g.in[2];
    g.s[0] = g.in[1] * g.in[2];
    g.s_c = g.in[0] * g.s[0];
    g.s_n = g.c * g.s_c;
  }
  std::vector<std::vector<int64_t>> levels = spec.levels;
  if (levels.empty()) levels.push_back(std::vector<int64_t>(static_cast<size_t>(k), 1));
  MRMF_CHECK_KIND(Shape, static_cast<int>(levels.size()) <= kFusedMaxLevels, who, ": ", levels.size(),
                  " levels, at most ", kFusedMaxLevels);
  g.levels = static_cast<int>(levels.size());
  for (int l = 0; l < g.levels; ++l) {
    const auto& fl = levels[static_cast<size_t>(l)];
    MRMF_CHECK_KIND(Shape, static_cast<int>(fl.size()) == k, who, ": level ", l, " has ", fl.size(),
                    " factor(s), the input ", x.str(), " has ", k, " spatial axis/axes");
    for (int d = 0; d < k; ++d) {
      MRMF_CHECK_KIND(Shape, fl[static_cast<size_t>(d)] >= 1, who, ": factor ", fl[static_cast<size_t>(d)],
                      " must be >= 1");
      g.f[l][3 - k + d] = fl[static_cast<size_t>(d)];
    }
    for (int d = 0; d < 3 - k; ++d) g.f[l][d] = 1;
  }
  for (int d = 0; d < 3; ++d) {
    for (int l = 0; l < g.levels; ++l) g.block[d] = std::max(g.block[d], g.f[l][d]);
    for (int l = 0; l < g.levels; ++l)
      MRMF_CHECK_KIND(Shape, g.block[d] % g.f[l][d] == 0, who, ": level factors must be nested; factor ", g.f[l][d],
                      " does not divide ", g.block[d], " on spatial axis ", d - (3 - k));
    MRMF_CHECK_KIND(Shape, g.in[d] % g.block[d] == 0, who, ": spatial axis ", d - (3 - k), " has length ", g.in[d],
                    ", not divisible by the factor ", g.block[d]);
    g.nblk[d] = g.in[d] / g.block[d];
  }
  for (int l = 0; l < g.levels; ++l) {
    for (int d = 0; d < 3; ++d) g.out[l][d] = g.in[d] / g.f[l][d];
    g.inv[l] = 1.f / static_cast<float>(g.f[l][0] * g.f[l][1] * g.f[l][2]);
  }
  // Computation order: finer levels first (fewer inputs per output; stable
  // among equals). A level is derived from the closest (largest block)
  // earlier level whose factors divide its own on every axis.
  for (int l = 0; l < g.levels; ++l) g.order[l] = l;
  const auto cells = [&](int l) { return g.f[l][0] * g.f[l][1] * g.f[l][2]; };
  std::stable_sort(g.order, g.order + g.levels, [&](int a, int b) { return cells(a) < cells(b); });
  for (int k = 0; k < g.levels; ++k) {
    const int l = g.order[k];
    g.src[l] = -1;
    for (int j = 0; j < k; ++j) {
      const int m = g.order[j];
      bool divides = true;
      for (int d = 0; d < 3; ++d) divides = divides && g.f[l][d] % g.f[m][d] == 0;
      if (divides && (g.src[l] < 0 || cells(m) > cells(g.src[l]))) g.src[l] = m;
    }
    if (g.src[l] >= 0) {
      for (int d = 0; d < 3; ++d) g.r[l][d] = g.f[l][d] / g.f[g.src[l]][d];
      g.inv_r[l] = 1.f / static_cast<float>(g.r[l][0] * g.r[l][1] * g.r[l][2]);
    }
  }
  g.transform = spec.transform;
  g.allow_vector = spec.vector_loads;
  g.allow_table = spec.log1p_table;
  g.allow_product = spec.log1p_product;
  g.chain_preload = spec.chain_preload;
  g.vector_preload = spec.vector_preload;
  if (spec.transform == FusedTransform::Scale) {
    MRMF_CHECK_KIND(Shape, static_cast<int64_t>(spec.scale.size()) == g.c, who, ": ", spec.scale.size(),
                    " scale value(s) for ", g.c, " channels");
    MRMF_CHECK_KIND(Shape, spec.shift.empty() || static_cast<int64_t>(spec.shift.size()) == g.c, who, ": ",
                    spec.shift.size(), " shift value(s) for ", g.c, " channels");
    for (int64_t c = 0; c < g.c; ++c) {
      g.scale[c] = spec.scale[static_cast<size_t>(c)];
      g.shift[c] = spec.shift.empty() ? 0.f : spec.shift[static_cast<size_t>(c)];
    }
  }
  return g;
}

namespace {
// Level l's output [N, C, s1/f1, ...] for an input of k spatial axes.
std::vector<Shape> level_shapes(const FusedGeom& g, int k) {
  std::vector<Shape> out;
  for (int l = 0; l < g.levels; ++l) {
    std::vector<int64_t> d{g.n, g.c};
    for (int slot = 3 - k; slot < 3; ++slot) d.push_back(g.out[l][slot]);
    out.emplace_back(d);
  }
  return out;
}
}  // namespace

std::vector<Shape> fused_downsample_shapes(const Shape& x, const FusedDownsampleSpec& spec, const std::string& who) {
  return level_shapes(make_fused_geom(x, spec, who), x.ndim() - 2);
}

void fused_downsample(Stream& s, const Tensor& x, const std::vector<Tensor>& ys, const FusedDownsampleSpec& spec) {
  const char* op = "fused_downsample";
  MRMF_CHECK_KIND(Shape, x.is_contiguous(), op, ": expected a contiguous input, got ", x.str());
  const RawType r = raw_type_of(x.dtype(), op);
  const FusedGeom g = make_fused_geom(x.shape(), spec, op);  // checked once, used for the shapes and the run
  const std::vector<Shape> want = level_shapes(g, x.ndim() - 2);
  MRMF_CHECK_KIND(Shape, ys.size() == want.size(), op, ": ", ys.size(), " output(s) for ", want.size(), " level(s)");
  FusedOutputs o;
  for (size_t l = 0; l < ys.size(); ++l) {
    check_devices(op, s, {&x, &ys[l]});
    check_f32_contiguous(op, {&ys[l]});
    MRMF_CHECK_KIND(Shape, ys[l].shape() == want[l], op, ": output ", l, " is ", ys[l].shape().str(), ", expected ",
                    want[l].str());
    o.y[l] = ys[l].data<float>();
  }
  if (x.numel() == 0) return;
  MRMF_DISPATCH(s, fused_downsample(s, x.raw_data(), r, o, g));
}

FusedDownsamplePlan plan_fused_downsample(const Shape& x, DType dt, const FusedDownsampleSpec& spec,
                                          const std::string& who) {
  FusedDownsamplePlan p;
  p.raw = raw_type_of(dt, who);
  p.geom = make_fused_geom(x, spec, who);
  return p;
}

void run_fused_downsample(Stream& s, const FusedDownsamplePlan& p, const void* x, const FusedOutputs& o) {
  // Nothing to do for an empty batch or an empty axis (the CPU rows'
  // geometry divides by the last axis's block count), as the checked call.
  if (p.geom.n == 0 || p.geom.in[0] == 0 || p.geom.in[1] == 0 || p.geom.in[2] == 0) return;
  MRMF_DISPATCH(s, fused_downsample(s, x, p.raw, o, p.geom));
}

std::vector<Tensor> fused_downsample(Stream& s, const Tensor& x, const FusedDownsampleSpec& spec) {
  std::vector<Tensor> ys;
  for (const Shape& sh : fused_downsample_shapes(x.shape(), spec, "fused_downsample"))
    ys.push_back(Tensor::empty(sh, DType::F32, x.device()));
  fused_downsample(s, x, ys, spec);
  return ys;
}

}  // namespace mrmf::kernels
