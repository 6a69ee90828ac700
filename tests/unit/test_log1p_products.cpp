// The fused downsample's log1p of 16-bit integer counts over blocks as one
// logarithm of the product of (1 + x) (kernels/log1p_products.h): the
// product rule's bits by hand in every traversal, the accuracy against
// double precision beside the per-element sums', the range and domain
// edges, and which blocks take it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "data/h5file.h"
#include "kernels/log1p_products.h"
#include "support/fused_functors.h"

using namespace mrmf;
using namespace mrmf::kernels;
using namespace mrmf::kernels::test;

namespace {

using Levels = std::vector<std::vector<int64_t>>;

static_assert(kFusedProductMinCells == 4 && kFusedProductMaxCells == 15, "the blocks below are chosen around these");

// A channels-last [N, D, H, W, C] tensor of dtype dt (U16 or I16) from values.
Tensor counts_tensor(const Shape& s, DType dt, const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty(s, dt);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::U16)
      static_cast<uint16_t*>(t.raw_data())[i] = static_cast<uint16_t>(v[static_cast<size_t>(i)]);
    else
      static_cast<int16_t*>(t.raw_data())[i] = static_cast<int16_t>(v[static_cast<size_t>(i)]);
  }
  return t;
}

// Count-like values: small ones and zeros, a few at the type's top, and a
// third spread over the type's non-negative range (so that products round
// and their order shows in the bits); int16 also -1 (log1p = -inf) where
// minus_one.
std::vector<int32_t> count_values(int64_t n, DType dt, uint32_t seed, bool minus_one = false) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  const int32_t top = dt == DType::U16 ? 65535 : 32767;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = static_cast<uint32_t>((i + seed) * 2654435761u) >> 8;
    v[static_cast<size_t>(i)] = h % 97 == 0  ? top - static_cast<int32_t>(h % 3)
                                : h % 3 == 0 ? static_cast<int32_t>((h >> 2) % static_cast<uint32_t>(top + 1))
                                : h % 5 == 0 ? 0
                                             : static_cast<int32_t>(h % 40);
    if (minus_one && h % 211 == 0) v[static_cast<size_t>(i)] = -1;
  }
  return v;
}

// The product rule by hand on channels-last [N, D, H, W, C] values: per
// output and channel, per z the f0 x f1 count factors in (a, b) order from
// the first, those products multiplied into 1 in z order, the logarithm,
// times 1/|block|; channels-first [N, C, D', H', W'] out.
std::vector<float> product_rule(const std::vector<int32_t>& v, const Shape& s, const std::vector<int64_t>& f,
                                bool signed_type) {
  // count_factor reads the low 16 bits: int16's as signed, uint16's as unsigned.
  const int64_t N = s[0], D = s[1], H = s[2], W = s[3], C = s[4];
  const int64_t Dp = D / f[0], Hp = H / f[1], Wp = W / f[2], cells = f[0] * f[1] * f[2];
  const float inv = 1.f / static_cast<float>(cells);
  std::vector<float> out(static_cast<size_t>(N * C * Dp * Hp * Wp));
  const auto at = [&](int64_t n, int64_t d, int64_t h, int64_t w, int64_t c) {
    const int32_t x = v[static_cast<size_t>((((n * D + d) * H + h) * W + w) * C + c)];
    return x < 0 ? count_factor<true>(static_cast<uint32_t>(x)) : count_factor<false>(static_cast<uint32_t>(x));
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t od = 0; od < Dp; ++od)
        for (int64_t oh = 0; oh < Hp; ++oh)
          for (int64_t ow = 0; ow < Wp; ++ow) {
            float p = 1.f;
            for (int64_t z = 0; z < f[2]; ++z) {
              float t = 0.f;
              for (int64_t a = 0; a < f[0]; ++a)
                for (int64_t b = 0; b < f[1]; ++b) {
                  const float u = at(n, od * f[0] + a, oh * f[1] + b, ow * f[2] + z, c);
                  t = a == 0 && b == 0 ? u : t * u;
                }
              p *= t;
            }
            out[static_cast<size_t>((((n * C + c) * Dp + od) * Hp + oh) * Wp + ow)] =
                (signed_type ? log_of_count_product<true>(p, cells) : log_of_count_product<false>(p, cells)) * inv;
          }
  return out;
}

bool same_bits(const Tensor& t, const std::vector<float>& want) {
  return t.numel() == static_cast<int64_t>(want.size()) &&
         std::memcmp(t.raw_data(), want.data(), want.size() * sizeof(float)) == 0;
}

FusedDownsampleSpec log1p_spec(const Levels& levels, bool product = true) {
  FusedDownsampleSpec spec;
  spec.transform = FusedTransform::Log1p;
  spec.levels = levels;
  spec.log1p_product = product;
  return spec;
}

}  // namespace

TEST_CASE("log1p products: the kernel's bits equal the product rule by hand in every traversal", "[fused_downsample]") {
  struct Case {
    Shape shape;
    std::vector<int64_t> f;
  };
  // C = 4 channels-last (the GPU's vector kernel applies) and C = 3; blocks
  // of 4 (last-axis factors 1, 2 and 4), 8 and 15 elements.
  const std::vector<Case> cases = {{{2, 4, 4, 16, 4}, {2, 2, 2}}, {{2, 4, 4, 16, 4}, {2, 2, 1}},
                                   {{2, 4, 4, 16, 4}, {2, 1, 2}}, {{2, 4, 4, 16, 4}, {1, 2, 2}},
                                   {{2, 4, 4, 16, 4}, {1, 1, 4}}, {{1, 5, 3, 8, 4}, {5, 3, 1}},
                                   {{2, 4, 6, 6, 3}, {2, 2, 2}},  {{1, 4, 4, 2050, 3}, {2, 2, 2}}};
  int vector_cases = 0;
  for (DType dt : {DType::U16, DType::I16})
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      INFO(dtype_name(dt) << ", case " << k);
      const std::vector<int32_t> v = count_values(c.shape.numel(), dt, 3 + static_cast<uint32_t>(k), dt == DType::I16);
      const Tensor raw = counts_tensor(c.shape, dt, v);
      const FusedDownsampleSpec spec = log1p_spec({c.f});
      const std::vector<float> want = product_rule(v, c.shape, c.f, dt == DType::I16);
      const auto rows = fused_downsample(cpu_stream(), raw, spec);
      REQUIRE(same_bits(rows[0], want));
      for (Traversal t : {Traversal::Full, Traversal::One})
        CHECK(same_bits(by_functor_any(raw, spec, rows, t)[0], want));
      const FusedGeom g = make_fused_geom(raw.shape(), spec, "test");
      if (fused_vector_f2(g) != 0) {
        ++vector_cases;
        CHECK(same_bits(by_functor_any(raw, spec, rows, Traversal::Vec)[0], want));
        if (fused_vector_preloadable(raw_type_of(dt, "test"), g))
          CHECK(same_bits(by_functor_any(raw, spec, rows, Traversal::VecPreload)[0], want));
      }
    }
  CHECK(vector_cases == 2 * 6);
  // Channels-first input (one channel per row: the CPU's kC = 1 rows), and
  // channels-last with a channel count and last-axis factor known only at
  // run time (C = 5, f2 = 3): the CPU rows against the per-position
  // traversals, and within float rounding of the sums.
  struct Other {
    Shape shape;
    bool last;
    std::vector<int64_t> f;
  };
  for (DType dt : {DType::U16, DType::I16})
    for (const Other& c : {Other{{2, 3, 4, 4, 8}, false, {2, 2, 2}}, Other{{2, 4, 4, 6, 8}, false, {1, 2, 4}},
                           Other{{1, 4, 4, 9, 5}, true, {1, 2, 3}}, Other{{2, 3, 1600}, false, {4}}}) {
      INFO(dtype_name(dt) << ", " << c.shape.str() << (c.last ? " channels-last" : " channels-first"));
      const Tensor raw = counts_tensor(c.shape, dt, count_values(c.shape.numel(), dt, 13));
      FusedDownsampleSpec spec = log1p_spec({c.f});
      spec.layout = c.last ? InputLayout::ChannelsLast : InputLayout::ChannelsFirst;
      const auto rows = fused_downsample(cpu_stream(), raw, spec);
      for (Traversal t : {Traversal::Full, Traversal::One})
        CHECK(bit_equal(by_functor_any(raw, spec, rows, t)[0], rows[0]));
      spec.log1p_product = false;
      const Tensor sums = fused_downsample(cpu_stream(), raw, spec)[0];
      CHECK_FALSE(bit_equal(sums, rows[0]));
      for (int64_t i = 0; i < sums.numel(); ++i)
        REQUIRE(rows[0].data<float>()[i] == Approx(sums.data<float>()[i]).epsilon(1e-6));
    }
  // Chains (the GPU's chain kernel): the first level by products, the
  // derived ones averaged from its outputs, the same bits as the CPU rows;
  // the first level also equals the rule by hand.
  for (DType dt : {DType::U16, DType::I16})
    for (const Levels& levels : {Levels{{2, 2, 1}, {2, 2, 2}}, Levels{{1, 2, 2}, {2, 2, 2}},
                                 Levels{{2, 2, 2}, {4, 4, 4}}, Levels{{2, 1, 2}, {2, 2, 2}, {4, 4, 4}}}) {
      INFO(dtype_name(dt) << ", " << levels.size() << " levels, first " << levels[0][0] << "x" << levels[0][1] << "x"
                          << levels[0][2]);
      const Shape shape{2, 8, 4, 16, 4};
      const std::vector<int32_t> v = count_values(shape.numel(), dt, 5);
      const Tensor raw = counts_tensor(shape, dt, v);
      const FusedDownsampleSpec spec = log1p_spec(levels);
      const auto rows = fused_downsample(cpu_stream(), raw, spec);
      CHECK(same_bits(rows[0], product_rule(v, shape, levels[0], dt == DType::I16)));
      REQUIRE(fused_chain_levels(make_fused_geom(shape, spec, "test")) == static_cast<int>(levels.size()));
      std::vector<Traversal> ts{Traversal::Full, Traversal::Chain};
      if (fused_chain_preloadable(raw_type_of(dt, "test"), make_fused_geom(shape, spec, "test")))
        ts.push_back(Traversal::ChainPreload);
      for (Traversal t : ts) {
        const auto got = by_functor_any(raw, spec, rows, t);
        for (size_t l = 0; l < rows.size(); ++l) {
          INFO("traversal " << static_cast<int>(t) << ", level " << l);
          CHECK(bit_equal(got[l], rows[l]));
        }
      }
    }
}

TEST_CASE("log1p products: within float rounding of double-precision log1p, as the sums are", "[fused_downsample]") {
  // Every 16-bit pattern equally likely (large products: the rounding of
  // the multiplications matters most) and count-like input.
  const Shape shape{2, 10, 6, 16, 4};
  for (DType dt : {DType::U16, DType::I16})
    for (bool uniform : {true, false})
      for (const std::vector<int64_t>& f : {std::vector<int64_t>{2, 2, 2}, {5, 3, 1}, {2, 2, 1}}) {
        INFO(dtype_name(dt) << ", " << (uniform ? "uniform" : "counts") << ", block " << f[0] << "x" << f[1] << "x"
                            << f[2]);
        std::vector<int32_t> v = count_values(shape.numel(), dt, 9);
        if (uniform)  // every non-negative value of the type equally likely
          for (size_t i = 0; i < v.size(); ++i)
            v[i] = static_cast<int32_t>((i * 2654435761u) >> 16 & (dt == DType::U16 ? 0xFFFF : 0x7FFF));
        const Tensor raw = counts_tensor(shape, dt, v);
        const Tensor prod = fused_downsample(cpu_stream(), raw, log1p_spec({f}))[0];
        const Tensor sums = fused_downsample(cpu_stream(), raw, log1p_spec({f}, false))[0];
        // Double precision, channels-first like the outputs.
        const int64_t C = 4, D = shape[1] / f[0], H = shape[2] / f[1], W = shape[3] / f[2];
        double worst_prod = 0, worst_sums = 0;
        int64_t differ = 0;
        for (int64_t n = 0; n < shape[0]; ++n)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t o = 0; o < D * H * W; ++o) {
              const int64_t od = o / (H * W), oh = o / W % H, ow = o % W;
              double s = 0;
              for (int64_t a = 0; a < f[0]; ++a)
                for (int64_t b = 0; b < f[1]; ++b)
                  for (int64_t z = 0; z < f[2]; ++z) {
                    const int64_t i =
                        (((n * shape[1] + od * f[0] + a) * shape[2] + oh * f[1] + b) * shape[3] + ow * f[2] + z) * C +
                        c;
                    s += std::log1p(static_cast<double>(v[static_cast<size_t>(i)]));
                  }
              const double ref = s / static_cast<double>(f[0] * f[1] * f[2]);
              const int64_t idx = (n * C + c) * D * H * W + o;
              const float p = prod.data<float>()[idx], q = sums.data<float>()[idx];
              // In units of the float spacing at the reference (at least that at 1).
              const double ulp = std::ldexp(1.0, std::ilogb(std::max(1.0, std::fabs(ref))) - 23);
              worst_prod = std::max(worst_prod, std::fabs(p - ref) / ulp);
              worst_sums = std::max(worst_sums, std::fabs(q - ref) / ulp);
              differ += p != q;
            }
        INFO("worst error, products " << worst_prod << " ulp, sums " << worst_sums << " ulp; " << differ
                                      << " outputs differ");
        // Measured: products up to 1.9 ulp, sums up to 2.8 (15 additions).
        CHECK(worst_prod <= 3.0);
        CHECK(worst_sums <= 4.0);
        if (uniform) CHECK(differ > 0);  // the two rules really are different paths
      }
}

TEST_CASE("log1p products: range and domain at the edges", "[fused_downsample]") {
  const float inf = std::numeric_limits<float>::infinity();
  // Fifteen factors at the top of uint16 (2^8 each after scaling: 2^120)
  // and fifteen zeros (2^-120): finite, log1p(65535) and exactly 0.
  for (int32_t value : {65535, 0}) {
    INFO("uint16 " << value);
    const Shape shape{1, 5, 3, 4, 4};
    const std::vector<int32_t> v(static_cast<size_t>(shape.numel()), value);
    const Tensor y = fused_downsample(cpu_stream(), counts_tensor(shape, DType::U16, v), log1p_spec({{5, 3, 1}}))[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      if (value == 0)
        REQUIRE(y.data<float>()[i] == 0.f);
      else
        REQUIRE(y.data<float>()[i] == Approx(std::log1p(65535.0)).epsilon(1e-6));
    }
  }
  // int16: -1 is log1p's -inf, below -1 its NaN, and a block holding both NaN;
  // the sums give the same.
  struct Edge {
    std::vector<int32_t> block;  // the 2 x 2 x 2 block of channel 0
    int kind;                    // 0 finite, 1 -inf, 2 NaN
  };
  for (const Edge& e : {Edge{{0, 1, 2, 3, 32767, 5, 6, 7}, 0}, Edge{{0, -1, 2, 3, 4, 5, 6, 7}, 1},
                        Edge{{-1, -1, -1, -1, -1, -1, -1, -1}, 1}, Edge{{0, 1, -5, 3, 4, 5, 6, 7}, 2},
                        Edge{{-1, 1, 2, 3, 4, 5, 6, -32768}, 2}}) {
    const Shape shape{1, 2, 2, 2, 4};
    std::vector<int32_t> v(static_cast<size_t>(shape.numel()), 3);
    for (int64_t k = 0; k < 8; ++k) v[static_cast<size_t>(k * 4)] = e.block[static_cast<size_t>(k)];
    const Tensor raw = counts_tensor(shape, DType::I16, v);
    for (bool product : {true, false}) {
      INFO("kind " << e.kind << (product ? ", products" : ", sums"));
      const Tensor y = fused_downsample(cpu_stream(), raw, log1p_spec({{2, 2, 2}}, product))[0];
      const float y0 = y.data<float>()[0];
      if (e.kind == 0) CHECK(std::isfinite(y0));
      if (e.kind == 1) CHECK(y0 == -inf);
      if (e.kind == 2) CHECK(std::isnan(y0));
      CHECK(y.data<float>()[1] == Approx(std::log1p(3.0)).epsilon(1e-6));  // the other channels untouched
    }
  }
}

TEST_CASE("log1p products: only 16-bit integer blocks of 4 to 15 elements take them", "[fused_downsample]") {
  // Blocks of 1, 2, 3 and 16 elements, and float16 / float32 input, give the
  // sums' bits whatever log1p_product says; blocks of 4 to 15 of uint16
  // and int16 do not (some output differs on input with large counts).
  const Shape shape{2, 8, 4, 24, 4};
  for (DType dt : {DType::U16, DType::I16, DType::F16, DType::F32})
    for (const std::vector<int64_t>& f :
         {std::vector<int64_t>{1, 1, 1}, {2, 1, 1}, {1, 1, 2}, {1, 1, 3}, {1, 1, 4}, {2, 2, 2}, {4, 4, 1}, {4, 2, 2}}) {
      const int64_t cells = f[0] * f[1] * f[2];
      const bool takes = (dt == DType::U16 || dt == DType::I16) && cells >= 4 && cells <= 15;
      INFO(dtype_name(dt) << ", block of " << cells);
      Tensor raw;
      if (dt == DType::U16 || dt == DType::I16) {
        std::vector<int32_t> v(static_cast<size_t>(shape.numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 2654435761u) >> 17 & 0x7FFF);
        raw = counts_tensor(shape, dt, v);
      } else {
        Tensor x = Tensor::empty(shape);
        for (int64_t i = 0; i < x.numel(); ++i)
          x.data<float>()[i] = static_cast<float>((static_cast<uint64_t>(i) * 2654435761u) >> 17 & 0x3FF);
        raw = dt == DType::F32 ? x : data::from_float32(x, dt);
      }
      const Tensor on = fused_downsample(cpu_stream(), raw, log1p_spec({f}))[0];
      const Tensor off = fused_downsample(cpu_stream(), raw, log1p_spec({f}, false))[0];
      CHECK(bit_equal(on, off) == !takes);
    }
}
