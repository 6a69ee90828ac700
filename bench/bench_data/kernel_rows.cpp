// bench_data's section (b): the fused downsample kernel's CPU rows (and GPU
// kernels where a device exists) against a copy of the same bytes.
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_data/sections.h"
#include "core/device.h"
#include "kernels/fused_downsample_chain.h"
#include "kernels/fused_downsample_ops.h"
#include "kernels/rows_avx2.h"
#include "kernels/rows_avx512.h"

namespace mrmf::bench {

// (b) fused kernel vs memcpy of the same bytes, production-sized.
// Two ratios: the median of paired copy/kernel times, and best copy time /
// best kernel time. This VM's memory latency changes phase every few
// seconds (other tenants): the copy streams through it, the kernel's
// short strided bursts do not, so the paired median swings between ~60 %
// and ~110 % from one run to the next; the best times are each code's own
// cost with the least interference.
void kernel_rows(const KernelRowsArgs& a) {
  {
    char title[96];  // padded to the rows' name column ("    cpu  " and 60 characters)
    std::snprintf(title, sizeof title, "fused downsample [%d, %d^3, 4] uint16 (%.0f MB)", a.batch, a.side,
                  double(a.batch) * a.side * a.side * a.side * 8 / 1e6);
    row("\n(b) %-65s %9s %9s %9s %7s %6s  (ms, GB/s: cpu medians of 21, cuda best of 10)\n", title, "ms", "GB/s",
        "copyGB/s", "paired", "best");
  }
  // Two inputs. `raw`: every 16-bit pattern equally likely, the worst
  // case for the log1p table (each lookup a random line of 256 KB).
  // `counts`: geometric with mean 8, like CosmoFlow's particle counts
  // (small integers: the lookups stay on a few lines of the table).
  Tensor raw = Tensor::empty({a.batch, a.side, a.side, a.side, 4}, DType::U16);
  Tensor counts = Tensor::empty(raw.shape(), DType::U16);
  {
    auto* p = static_cast<uint16_t*>(raw.raw_data());
    auto* q = static_cast<uint16_t*>(counts.raw_data());
    for (int64_t i = 0; i < raw.numel(); ++i) {
      p[i] = static_cast<uint16_t>(static_cast<uint64_t>(i) * 2654435761u >> 22);
      q[i] = geometric_count(i);
    }
  }
  struct Case {
    const char* name;
    std::vector<std::vector<int64_t>> levels;
    kernels::FusedTransform transform = kernels::FusedTransform::None;
    bool count_data = false;  // the `counts` input instead of `raw`
  };
  // The log1p rows: CosmoFlow's input transform (configs/cosmoflow_*.yaml),
  // one transcendental per element; a host-side reduction of a 128^3 cube
  // with libm's scalar log1pf took ~110 ms on one core of the H200 host.
  const auto log1p = kernels::FusedTransform::Log1p;
  const std::vector<Case> cases = {{"1/1 (convert + NDHWC->NCDHW)", {{1, 1, 1}}},
                                   {"1/8 (2x2x2)", {{2, 2, 2}}},
                                   {"1/2 along x", {{2, 1, 1}}},
                                   {"1/2 along z (the last axis)", {{1, 1, 2}}},
                                   {"1/1 + 1/8 + 1/64 in one pass", {{1, 1, 1}, {2, 2, 2}, {4, 4, 4}}},
                                   {"1/2 + 1/8 in one pass (a CosmoFlow ladder)", {{2, 1, 1}, {2, 2, 2}}},
                                   {"1/1, log1p", {{1, 1, 1}}, log1p},
                                   {"1/8 (2x2x2), log1p", {{2, 2, 2}}, log1p},
                                   {"1/1, log1p, counts", {{1, 1, 1}}, log1p, true},
                                   {"1/8 (2x2x2), log1p, counts", {{2, 2, 2}}, log1p, true},
                                   {"1/2 along x, log1p, counts", {{2, 1, 1}}, log1p, true},
                                   {"1/4 (2x2x1), log1p, counts", {{2, 2, 1}}, log1p, true},
                                   {"ladder (1/2 + 1/8), log1p, counts", {{2, 1, 1}, {2, 2, 2}}, log1p, true}};
  // log1p of uint16 reads a table by default, and blocks of 4 to 15
  // elements take one logarithm of their product (kernels/log1p_products.h).
  // Each log1p row is timed again with log1p computed per element
  // (", computed"); rows with such blocks with the table's values summed
  // (", table, summed", the default before products); on CPUs with
  // AVX-512 every row without its AVX-512 pieces (", no AVX-512":
  // kernels/rows_avx512.h; what a CPU without AVX-512, such as
  // Perlmutter's Milan hosts, runs), and the table's sums so too; and on
  // CPUs with AVX2 the rows that have AVX2 pieces (kernels/rows_avx2.h:
  // those without a transform, and products) with neither (", plain
  // loops"): the A/B of each path. (Before session 46 a product row's
  // ", no AVX-512" summed the table.)
  enum class Pieces { Best, NoAvx512, Plain };
  struct Run {
    Case c;
    bool table = true;
    Pieces pieces = Pieces::Best;
    bool product = true;
  };
  // Whether a level read from the input (not derived from another) has
  // such blocks.
  const auto has_product_blocks = [&](const Case& c) {
    kernels::FusedDownsampleSpec spec;
    spec.levels = c.levels;
    const kernels::FusedGeom g = kernels::make_fused_geom(raw.shape(), spec, "bench");
    for (int l = 0; l < g.levels; ++l) {
      const int64_t cells = g.f[l][0] * g.f[l][1] * g.f[l][2];
      if (g.src[l] < 0 && cells >= kernels::kFusedProductMinCells && cells <= kernels::kFusedProductMaxCells)
        return true;
    }
    return false;
  };
  // Which pieces this process may run (MRMF_CPU_AVX512=0 keeps AVX-512 off).
  const bool has_avx512 = kernels::rows_avx512();
  kernels::set_rows_avx512(false);
  const bool has_avx2 = kernels::rows_avx2();
  const auto use = [&](Pieces p) {
    kernels::set_rows_avx512(has_avx512 && p == Pieces::Best);
    kernels::set_rows_avx2(p != Pieces::Plain);
  };
  use(Pieces::Best);
  std::vector<Run> runs;
  for (const Case& c : cases) {
    const bool lg = c.transform == log1p, products = lg && has_product_blocks(c);
    runs.push_back({c, true, Pieces::Best, true});
    if (products) runs.push_back({c, true, Pieces::Best, false});
    if (has_avx512) runs.push_back({c, true, Pieces::NoAvx512, true});
    if (has_avx512 && products) runs.push_back({c, true, Pieces::NoAvx512, false});
    if (has_avx2 && (c.transform == kernels::FusedTransform::None || products))
      runs.push_back({c, true, Pieces::Plain, true});
    if (lg) runs.push_back({c, false, Pieces::Best, false});
  }
  for (const auto& [c, table, pieces, product] : runs) {
    const Tensor& in = c.count_data ? counts : raw;
    const std::string name = std::string(c.name) +
                             (!table                             ? ", computed"
                              : !product && c.transform == log1p ? ", table, summed"
                                                                 : "") +
                             (pieces == Pieces::NoAvx512 ? ", no AVX-512"
                              : pieces == Pieces::Plain  ? ", plain loops"
                                                         : "");
    if (!a.wanted(name)) continue;
    kernels::FusedDownsampleSpec spec;
    spec.levels = c.levels;
    spec.transform = c.transform;
    spec.log1p_table = table;
    spec.log1p_product = product;
    std::vector<Tensor> ys;
    int64_t bytes = static_cast<int64_t>(raw.nbytes());
    for (const Shape& s : kernels::fused_downsample_shapes(raw.shape(), spec, "bench")) {
      ys.push_back(Tensor::empty(s));
      bytes += s.numel() * 4;
    }
    use(pieces);
    if (!a.ab_var.empty()) {
      const char* before = std::getenv(a.ab_var.c_str());
      const std::string saved = before ? before : "";
      const auto with = [&](const std::string& value) {
        return [&, value] {
          setenv(a.ab_var.c_str(), value.c_str(), 1);
          kernels::fused_downsample(cpu_stream(), in, ys, spec);
        };
      };
      const Paired q = paired(31, with(a.ab_a), with(a.ab_b));
      use(Pieces::Best);
      if (before)  // as it was, for the rows and sections after this one
        setenv(a.ab_var.c_str(), saved.c_str(), 1);
      else
        unsetenv(a.ab_var.c_str());
      row("    cpu  %-60s %s=%s %8.3f ms, =%s %8.3f ms: B/A %.3f (best %.3f)\n", name.c_str(), a.ab_var.c_str(),
          a.ab_a.c_str(), q.a * 1e3, a.ab_b.c_str(), q.b * 1e3, q.ratio, q.b_best / q.a_best);
      continue;
    }
    std::vector<char> src(static_cast<size_t>(bytes / 2), 1), dst(static_cast<size_t>(bytes / 2));
    // Kernel and copy alternate, and the ratio is taken per pair: on a
    // shared VM the bandwidth drifts by 2x within seconds, so best-of-N
    // times taken apart do not compare.
    const Paired pr = paired(
        21, [&] { kernels::fused_downsample(cpu_stream(), in, ys, spec); },
        [&] { par_memcpy(dst.data(), src.data(), src.size()); });
    use(Pieces::Best);
    row("    cpu  %-60s %9.3f %9.2f %9.2f %6.0f%% %5.0f%%\n", name.c_str(), pr.a * 1e3, bytes / pr.a / 1e9,
        bytes / pr.b / 1e9, 100 * pr.ratio, 100 * pr.b_best / pr.a_best);
    if (cuda_device_count() > 0 && pieces == Pieces::Best) {  // the GPU rows have no such variant
      Stream s = Stream::create(Device::cuda(0));
      Tensor draw = in.to(Device::cuda(0), s);
      std::vector<Tensor> dys;
      for (const Tensor& y : ys) dys.push_back(Tensor::empty(y.shape(), DType::F32, Device::cuda(0)));
      Tensor da = Tensor::empty({bytes / 8}, DType::F32, Device::cuda(0)),
             db = Tensor::empty({bytes / 8}, DType::F32, Device::cuda(0));
      // Each request side by side: the vector kernel (one level) or the
      // chain kernel (several), the default for these requests, which for
      // two-level chains of blocks of <= 4 rows preloads every row
      // (FusedGeom::chain_preload); for those also the chain kernel with
      // two rows in flight, what it replaced; for single levels of
      // blocks of 2-4 rows the vector kernel's variant that preloads
      // every row (FusedGeom::vector_preload, off by default until
      // measured here); and the per-position traversal they replace.
      const kernels::FusedGeom geom = kernels::make_fused_geom(in.shape(), spec, "bench");
      const bool preloadable = kernels::fused_chain_preloadable(kernels::RawType::U16, geom);
      const bool vec_preloadable = kernels::fused_vector_preloadable(kernels::RawType::U16, geom);
      enum class Kind { Default, TwoRows, VecPreload, Positions };
      for (Kind kind : {Kind::Default, Kind::TwoRows, Kind::VecPreload, Kind::Positions}) {
        if (kind != Kind::Default && (!table || !product)) continue;  // the A/Bs: the default kernel only
        if (kind == Kind::TwoRows && !preloadable) continue;
        if (kind == Kind::VecPreload && !vec_preloadable) continue;
        spec.vector_loads = kind != Kind::Positions;
        spec.chain_preload = kind != Kind::TwoRows;
        spec.vector_preload = kind == Kind::VecPreload;
        const double tg = best_time(s, 10, [&] { kernels::fused_downsample(s, draw, dys, spec); });
        const double tgc = best_time(s, 10, [&] { db.copy_from(da, s); });
        const char* what = kind == Kind::Positions    ? ", per position"
                           : kind == Kind::TwoRows    ? ", chain, two rows in flight"
                           : kind == Kind::VecPreload ? ", vector, preloaded"
                           : preloadable              ? ", chain, preloaded"
                           : c.levels.size() > 1      ? ", chain"
                                                      : ", vector";
        // Best of 10 each, not paired: under "best", beside the CPU rows' best ratio.
        row("    cuda %-60s %9.3f %9.2f %9.2f %7s %5.0f%%\n", (name + what).c_str(), tg * 1e3, bytes / tg / 1e9,
            bytes / tgc / 1e9, "", 100 * tgc / tg);
      }
    }
  }
}

}  // namespace mrmf::bench
