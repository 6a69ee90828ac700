// The fused raw-data downsample kernel (CPU backend) against a plain
// reference (convert -> transform -> block mean -> channels-first), for every
// stored dtype, transform, layout and multi-level request, and against the
// offline reducer's files.
// The vector rows (AVX-512 and AVX2 pieces) against the plain loops:
// test_simd_rows.cpp.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/downsample.h"
#include "data/formats.h"
#include "data/h5file.h"
#include "kernels/fused_downsample_chain.h"
#include "kernels/fused_downsample_ops.h"
#include "support/fused_functors.h"

using namespace mrmf;
using namespace mrmf::kernels;
using namespace mrmf::kernels::test;
namespace fs = std::filesystem;

namespace {

// Reference: channels-last float32 input [N, s..., C] -> per-level channels-first outputs.
Tensor reference(const Tensor& raw, bool channels_last, FusedTransform tf, const std::vector<float>& scale,
                 const std::vector<float>& shift, const std::vector<int64_t>& f) {
  Tensor x = data::to_float32(raw);
  const int k = x.ndim() - 2;
  if (!channels_last) {  // [N, C, s...] -> [N, s..., C]
    const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
    std::vector<int64_t> d{N};
    for (int i = 0; i < k; ++i) d.push_back(x.size(2 + i));
    d.push_back(C);
    Tensor t = Tensor::empty(Shape(d));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) t.data<float>()[(n * S + s) * C + c] = x.data<float>()[(n * C + c) * S + s];
    x = t;
  }
  const int64_t C = x.size(-1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float& v = x.data<float>()[i];
    if (tf == FusedTransform::Log1p) v = std::log1p(v);
    if (tf == FusedTransform::Scale) v = v * scale[static_cast<size_t>(i % C)] + shift[static_cast<size_t>(i % C)];
  }
  Tensor y = data::average_blocks_channels_last(x, f);  // [N, s'..., C]
  const int64_t N = y.size(0), S = y.numel() / (N * C);
  std::vector<int64_t> d{N, C};
  for (int i = 0; i < k; ++i) d.push_back(y.size(1 + i));
  Tensor out = Tensor::empty(Shape(d));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) out.data<float>()[(n * C + c) * S + s] = y.data<float>()[(n * S + s) * C + c];
  return out;
}

void require_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.data<float>()[i], b = want.data<float>()[i];
    if (std::fabs(a - b) > tol * (1 + std::fabs(b))) {
      INFO("index " << i << " got " << a << " want " << b);
      REQUIRE(std::fabs(a - b) <= tol * (1 + std::fabs(b)));
    }
  }
}

}  // namespace

TEST_CASE("fused downsample: every dtype and transform, cube channels-last, three levels in one pass",
          "[fused_downsample]") {
  const std::vector<float> scale{0.5f, 2.f, -1.f}, shift{1.f, 0.f, 3.f};
  for (DType dt : {DType::U16, DType::I16, DType::F16, DType::F32})
    for (FusedTransform tf : {FusedTransform::None, FusedTransform::Log1p, FusedTransform::Scale}) {
      if (dt == DType::I16 && tf == FusedTransform::Log1p) continue;  // log1p of negative counts is not a use
      DYNAMIC_SECTION(dtype_name(dt) << " transform " << static_cast<int>(tf)) {
        const Tensor raw = raw_tensor({2, 4, 6, 8, 3}, dt, 7);
        FusedDownsampleSpec spec;
        spec.transform = tf;
        spec.scale = scale;
        spec.shift = shift;
        spec.levels = {{1, 1, 1}, {2, 2, 2}, {1, 2, 1}};
        const auto ys = fused_downsample(cpu_stream(), raw, spec);
        REQUIRE(ys.size() == 3);
        for (size_t l = 0; l < 3; ++l) require_close(ys[l], reference(raw, true, tf, scale, shift, spec.levels[l]));
      }
    }
}

TEST_CASE("fused downsample: Neuron Inverter series, transpose and the reinterpret quirk, 1/2 and 1/4 together",
          "[fused_downsample]") {
  for (DType dt : {DType::F32, DType::F16}) {
    const Tensor raw = raw_tensor({3, 16, 3}, dt, 1);  // (N, T, C)
    FusedDownsampleSpec spec;
    spec.levels = {{2}, {4}};
    const auto tr = fused_downsample(cpu_stream(), raw, spec);
    for (size_t l = 0; l < 2; ++l)
      require_close(tr[l], reference(raw, true, FusedTransform::None, {}, {}, spec.levels[l]));
    REQUIRE(tr[0].shape() == Shape({3, 3, 8}));
    // Quirk: the same memory read as (N, C, T).
    spec.layout = InputLayout::ChannelsFirst;
    const Tensor view = raw.view({3, 3, 16});
    const auto re = fused_downsample(cpu_stream(), view, spec);
    for (size_t l = 0; l < 2; ++l)
      require_close(re[l], reference(view, false, FusedTransform::None, {}, {}, spec.levels[l]));
    // Reinterpret != transpose (for C > 1).
    REQUIRE(re[0].data<float>()[1] != tr[0].data<float>()[1]);
  }
}

TEST_CASE("fused downsample: LBANN channels-first cube, large enough for the parallel path", "[fused_downsample]") {
  const Tensor raw = raw_tensor({2, 4, 16, 16, 16}, DType::I16, 3);
  FusedDownsampleSpec spec;
  spec.layout = InputLayout::ChannelsFirst;
  spec.levels = {{2, 2, 2}, {4, 4, 4}};
  const auto ys = fused_downsample(cpu_stream(), raw, spec);
  for (size_t l = 0; l < 2; ++l) require_close(ys[l], reference(raw, false, FusedTransform::None, {}, {}, spec.levels[l]));
}

TEST_CASE("fused downsample: bad requests are named", "[fused_downsample]") {
  const Tensor raw = raw_tensor({1, 6, 4}, DType::F32, 0);
  FusedDownsampleSpec spec;
  spec.levels = {{4}};
  REQUIRE_THROWS_WITH(fused_downsample(cpu_stream(), raw, spec),
                      Catch::Contains("length 6") && Catch::Contains("factor 4"));
  spec.levels = {{2}, {3}};
  REQUIRE_THROWS_WITH(fused_downsample(cpu_stream(), raw, spec), Catch::Contains("nested"));
  spec.levels = {{2}};
  spec.transform = FusedTransform::Scale;
  spec.scale = {1.f};
  REQUIRE_THROWS_WITH(fused_downsample(cpu_stream(), raw, spec), Catch::Contains("1 scale value(s) for 4 channels"));
  const Tensor bad = Tensor::empty({1, 4, 4}, DType::I32);
  REQUIRE_THROWS_WITH(fused_downsample(cpu_stream(), bad, FusedDownsampleSpec{}), Catch::Contains("int32"));
}

TEST_CASE("fused downsample equals the offline reducer's files", "[fused_downsample]") {
  const fs::path dir = fs::temp_directory_path() / ("mrmf_fds_" + std::to_string(::getpid()));
  fs::create_directories(dir / "in" / "train");
  // CosmoFlow: uint16 cube, offline 2x2x2 vs fused.
  const Tensor cube = raw_tensor({3, 4, 4, 8, 4}, DType::U16, 5);
  Tensor lab = Tensor::full({3, 4}, 0.25f);
  data::write_cosmoflow_file((dir / "in" / "train" / "c0.h5").string(), cube, lab);
  data::DownsampleOptions o;
  data::downsample_cosmoflow_dir((dir / "in").string(), (dir / "out").string(), {2, 2, 2}, o);
  const Tensor off = data::H5File::open_read((dir / "out" / "train" / "c0.h5").string()).read("3Dmap");
  FusedDownsampleSpec spec;
  spec.levels = {{2, 2, 2}};
  const Tensor fused = fused_downsample(cpu_stream(), cube, spec)[0];  // [n, C, D', H', W']
  const Tensor want = reference(off.view({3, 2, 2, 4, 4}), true, FusedTransform::None, {}, {}, {1, 1, 1});
  require_close(fused, want, 1e-6);
  // Neuron Inverter: float16 frames, offline along t vs fused transpose.
  {
    data::NeuronInverterWriter w((dir / "ni.h5").string(), DType::F16);
    w.create_split(data::Split::Train, 4, 16, 3);
    w.write(data::Split::Train, 0, data::to_float32(raw_tensor({4, 16, 3}, DType::F32, 2)), Tensor::full({4, 19}, 0.f));
  }
  data::downsample_neuron_file((dir / "ni.h5").string(), (dir / "ni2.h5").string(), 2, o);
  const Tensor ni_off = data::H5File::open_read((dir / "ni2.h5").string()).read("train_frames");
  const Tensor ni_raw = data::H5File::open_read((dir / "ni.h5").string()).read("train_frames");
  spec.levels = {{2}};
  require_close(fused_downsample(cpu_stream(), ni_raw, spec)[0],
                reference(ni_off, true, FusedTransform::None, {}, {}, {1}), 1e-6);
  fs::remove_all(dir);
}

TEST_CASE("fused downsample: the CPU row traversal gives the functors' (GPU math's) bits", "[fused_downsample]") {
  // Specialised paths (C = 3, 4; f2 = 1, 2), the runtime ones (C = 1, 2, 5; f2 = 3, 4),
  // both layouts, several segments per row (W / f2 outputs > 2048 / C), factors too
  // large for the row accumulator, and -0.0 inputs.
  struct Case {
    std::vector<int64_t> shape;
    bool last;
    std::vector<std::vector<int64_t>> levels;
  };
  const std::vector<Case> cases = {
      {{2, 4, 4, 8, 4}, true, {{1, 1, 1}, {2, 2, 2}, {4, 4, 4}}},
      {{1, 4, 2, 12, 4}, true, {{2, 1, 2}, {1, 2, 4}}},
      {{2, 4, 4, 6, 3}, true, {{1, 1, 1}, {2, 2, 2}}},
      {{2, 4, 4, 6, 3}, true, {{1, 1, 3}, {2, 2, 3}}},
      {{3, 1600, 3}, true, {{1}, {2}, {4}}},
      {{1, 4096, 3}, true, {{1}, {2}}},
      {{1, 2, 2, 1032, 4}, true, {{1, 1, 1}, {2, 2, 2}}},
      {{2, 4, 6, 2}, true, {{2, 2}, {1, 6}}},
      {{2, 2, 4, 1}, true, {{2, 2}}},
      {{1, 4, 4, 10, 5}, true, {{2, 2, 2}, {2, 2, 1}}},
      // Blocks of several rows with f2 = 1 whose row is no whole number of
      // the CPU rows' 64-byte prefetch steps (the last step partial).
      {{1, 2, 2, 13, 3}, true, {{2, 2, 1}}},
      {{1, 2, 2, 2, 37}, false, {{2, 2, 1}}},
      // Planes wide enough for several CPU slabs per plane, the last one
      // partial (17 blocks along axis 1, slabs of 2 or 3 by element size); derived levels from
      // a level with f1 = 1 and from one with f1 = 2; a level equal to another.
      {{1, 2, 34, 2048, 4}, true, {{1, 1, 1}, {2, 2, 2}, {1, 1, 1}}},
      {{1, 4, 34, 512, 3}, true, {{2, 1, 2}, {4, 2, 2}, {2, 2, 4}}},
      {{2, 3, 1600}, false, {{1}, {2}, {4}}},
      {{1, 4, 4, 4, 8}, false, {{1, 1, 1}, {2, 2, 2}, {4, 4, 2}}},
      {{1, 2, 2, 2, 4100}, false, {{1, 1, 1}, {1, 1, 2}}},
      // Factors whose inputs per output overflow the row accumulator (2048 floats).
      {{1, 4096, 3}, true, {{1}, {4096}, {2}}},
      {{1, 2, 1, 2, 4100}, false, {{1, 1, 4100}, {1, 1, 2}}},
      // ... in blocks of several planes along axis 0, whose levels advance
      // plane by plane (the plain-loop levels only after the block's last).
      {{1, 3, 8, 2, 4100}, false, {{2, 1, 4100}, {2, 1, 2}, {8, 2, 4100}, {4, 1, 2}}},
      // Six to eight channels: the per-position traversals' unrolled channel arrays filled to the end.
      {{1, 2, 4, 6, 8}, true, {{1, 1, 1}, {2, 2, 3}}},
      {{2, 4, 4, 14, 7}, true, {{2, 2, 7}, {1, 2, 1}}},
      {{1, 6, 4, 4, 6}, false, {{2, 2, 2}, {1, 1, 1}}},
      // Channel counts known only at run time (not 3 or 4), channels-last,
      // with no pooling along the last axis and rows of more than 1024
      // values: a segment of up to 2048 sums (its stack copy once held
      // 1024: an overflow).
      {{1, 1024, 2}, true, {{1}, {2}}},
      {{1, 16, 16, 16, 8}, true, {{1, 1, 1}}},
      {{1, 2, 64, 64, 5}, true, {{1, 1, 1}, {2, 2, 2}}},
      // The vector kernel's last-axis factors 4, 2 and 1 (C = 4, channels-last).
      {{2, 2, 4, 32, 4}, true, {{1, 1, 4}, {2, 1, 2}, {1, 2, 1}}},
      // Chains for the chain kernel (C = 4, channels-last; cases 0 and 6 are
      // chains too): the CosmoFlow ladders 1/2 along an outer or the last
      // axis -> 1/8, four levels, blocks of rows grouped 1 x 2 then 2 x 2
      // then 1 x 2, levels listed coarsest first, and a level repeated.
      {{2, 4, 4, 16, 4}, true, {{2, 1, 1}, {2, 2, 2}}},
      {{1, 2, 6, 12, 4}, true, {{1, 1, 2}, {2, 2, 2}}},
      {{1, 8, 4, 16, 4}, true, {{1, 1, 1}, {1, 1, 2}, {2, 2, 2}, {4, 4, 4}}},
      {{2, 4, 8, 8, 4}, true, {{1, 2, 1}, {2, 2, 1}, {2, 4, 2}}},
      {{1, 8, 8, 4, 4}, true, {{4, 4, 4}, {2, 2, 2}}},
      {{1, 2, 2, 8, 4}, true, {{1, 1, 1}, {2, 2, 2}, {2, 2, 2}}},
      // ... blocks that are no power of two (1/|block| inexact), no pooling
      // along the last axis (4 outputs per call at every level), one row per
      // block (pooling along the last axis only), a last-axis ratio of 4,
      // a first level with f2 = 4, and 1-D and 2-D inputs.
      {{2, 6, 6, 16, 4}, true, {{3, 1, 1}, {6, 2, 2}}},
      {{2, 4, 8, 8, 4}, true, {{1, 1, 1}, {2, 2, 1}}},
      {{2, 2, 2, 32, 4}, true, {{1, 1, 1}, {1, 1, 2}, {1, 1, 4}}},
      {{1, 4, 4, 8, 4}, true, {{1, 1, 1}, {4, 4, 4}}},
      {{1, 2, 2, 8, 4}, true, {{1, 1, 4}, {2, 2, 4}}},
      {{2, 32, 4}, true, {{1}, {2}, {4}}},
      {{2, 6, 8, 4}, true, {{1, 1}, {3, 2}}}};
  const std::vector<float> scale{0.5f, 2.f, -1.f, 3.f, 0.25f, 1.5f, -0.75f, 4.f},
      shift{1.f, 0.f, 3.f, -2.f, 0.5f, -1.f, 0.125f, 2.f};
  int vector_cases = 0, vector_preload_cases = 0, chain_cases = 0, preload_cases = 0;
  for (DType dt : {DType::U16, DType::I16, DType::F16, DType::F32})
    for (FusedTransform tf : {FusedTransform::None, FusedTransform::Log1p, FusedTransform::Scale})
      for (size_t k = 0; k < cases.size(); ++k) {
        if (dt == DType::I16 && tf == FusedTransform::Log1p) continue;
        const Case& c = cases[k];
        Tensor raw = raw_tensor(Shape(c.shape), dt, 11 + k);
        if (dt == DType::F32) raw.data<float>()[1] = -0.f;  // 0 + -0 = +0: the sum must start from 0 as well
        if (dt == DType::F16) static_cast<uint16_t*>(raw.raw_data())[1] = 0x8000;
        FusedDownsampleSpec spec;
        spec.layout = c.last ? InputLayout::ChannelsLast : InputLayout::ChannelsFirst;
        spec.transform = tf;
        const int64_t C = c.last ? c.shape.back() : c.shape[1];
        spec.scale.assign(scale.begin(), scale.begin() + C);
        spec.shift.assign(shift.begin(), shift.begin() + C);
        spec.levels = c.levels;
        INFO(dtype_name(dt) << " transform " << static_cast<int>(tf) << " case " << k);
        const auto rows = fused_downsample(cpu_stream(), raw, spec);
        const auto ref = by_functor_any(raw, spec, rows, Traversal::Full);
        for (size_t l = 0; l < rows.size(); ++l) REQUIRE(bit_equal(rows[l], ref[l]));
        // The GPU's chain kernel, where it applies.
        const FusedGeom cg = make_fused_geom(raw.shape(), spec, "test");
        if (fused_chain_levels(cg) != 0) {
          ++chain_cases;
          const auto chain = by_functor_any(raw, spec, rows, Traversal::Chain);
          for (size_t l = 0; l < rows.size(); ++l) {
            INFO("chain kernel, level " << l);
            REQUIRE(bit_equal(rows[l], chain[l]));
          }
          // ... and its preloading variant (2-byte types, two levels, blocks of <= 4 rows).
          if (fused_chain_preloadable(raw_type_of(dt, "test"), cg)) {
            ++preload_cases;
            const auto pre = by_functor_any(raw, spec, rows, Traversal::ChainPreload);
            for (size_t l = 0; l < rows.size(); ++l) {
              INFO("chain kernel with preloaded rows, level " << l);
              REQUIRE(bit_equal(rows[l], pre[l]));
            }
          }
        }
        // Each level alone (read from the input, none derived): the GPU's
        // single-level kernel.
        for (const auto& level : c.levels) {
          FusedDownsampleSpec one = spec;
          one.levels = {level};
          const auto rows1 = fused_downsample(cpu_stream(), raw, one);
          INFO("single-level kernel");
          REQUIRE(bit_equal(rows1[0], by_functor_any(raw, one, rows1, Traversal::One)[0]));
          // ... and the vector kernel, where it applies (channels-last, C = 4).
          if (fused_vector_f2(make_fused_geom(raw.shape(), one, "test")) != 0) {
            INFO("vector kernel");
            ++vector_cases;
            REQUIRE(bit_equal(rows1[0], by_functor_any(raw, one, rows1, Traversal::Vec)[0]));
            // ... and its preloading variant (2-byte types, blocks of 2-4 rows).
            if (fused_vector_preloadable(raw_type_of(dt, "test"), make_fused_geom(raw.shape(), one, "test"))) {
              INFO("vector kernel with preloaded rows");
              ++vector_preload_cases;
              REQUIRE(bit_equal(rows1[0], by_functor_any(raw, one, rows1, Traversal::VecPreload)[0]));
            }
          }
        }
      }
  CHECK(vector_cases == 11 * 45);  // 11 dtype/transform pairs x 45 levels with C = 4 channels-last (f2 = 1, 2, 4)
  CHECK(vector_preload_cases == 8 * 20);  // 2-byte dtype/transform pairs x the 20 of the 45 with blocks of 2-4 rows
  CHECK(chain_cases == 11 * 15);   // ... x 15 chains
  CHECK(preload_cases == 8 * 6);  // 2-byte dtype/transform pairs x the 6 two-level chains with blocks of <= 4 rows
}

TEST_CASE("fused downsample: log1p by table gives log1p_f32's bits for every 16-bit pattern", "[fused_downsample]") {
  CHECK(log1p_table(RawType::F32) == nullptr);
  const auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  };
  for (DType dt : {DType::U16, DType::I16, DType::F16}) {
    INFO(dtype_name(dt));
    const RawType r = raw_type_of(dt, "test");
    const float* table = log1p_table(r);
    REQUIRE(table != nullptr);
    CHECK(log1p_table(r) == table);  // built once
    // Every pattern once: a [1, 16, 16, 64, 4] channels-last cube (NaN,
    // infinities, -1 and below for int16 and float16 included).
    Tensor raw = Tensor::empty({1, 16, 16, 64, 4}, dt);
    auto* p = static_cast<uint16_t*>(raw.raw_data());
    for (uint32_t b = 0; b < (1u << 16); ++b) {
      p[b] = static_cast<uint16_t>(b);
      float want = 0.f;
      switch (r) {
        case RawType::U16: want = log1p_f32(RawLoad<RawType::U16>::from_bits(b)); break;
        case RawType::I16: want = log1p_f32(RawLoad<RawType::I16>::from_bits(b)); break;
        default: want = log1p_f32(RawLoad<RawType::F16>::from_bits(b)); break;
      }
      if (bits(table[b]) != bits(want)) FAIL_CHECK("pattern " << b << ": table " << table[b] << ", log1p_f32 " << want);
    }
    FusedDownsampleSpec spec;
    spec.transform = FusedTransform::Log1p;
    spec.log1p_product = false;  // the table's values summed (products: test_log1p_products.cpp)
    spec.levels = {{1, 1, 1}, {2, 2, 2}};
    // The CPU rows (with the table) against the functors computing log1p,
    // and the GPU's chain and vector kernels with the table.
    const auto rows = fused_downsample(cpu_stream(), raw, spec);
    const auto computed = by_functor_any(raw, spec, rows, Traversal::Full);
    const auto chain = by_functor_any(raw, spec, rows, Traversal::Chain, true);
    const auto preloaded = by_functor_any(raw, spec, rows, Traversal::ChainPreload, true);
    for (size_t l = 0; l < rows.size(); ++l) {
      INFO("level " << l);
      CHECK(bit_equal(rows[l], computed[l]));
      CHECK(bit_equal(rows[l], chain[l]));
      CHECK(bit_equal(rows[l], preloaded[l]));
    }
    FusedDownsampleSpec one = spec;
    one.levels = {{2, 2, 2}};
    CHECK(bit_equal(rows[1], by_functor_any(raw, one, {rows[1]}, Traversal::Vec, true)[0]));
    CHECK(bit_equal(rows[1], by_functor_any(raw, one, {rows[1]}, Traversal::VecPreload, true)[0]));
    CHECK(bit_equal(rows[1], by_functor_any(raw, one, {rows[1]}, Traversal::One, true)[0]));
    // The CPU rows with log1p computed (spec.log1p_table = false, the
    // benchmark's A/B): the table's bits.
    FusedDownsampleSpec no_table = spec;
    no_table.log1p_table = false;
    const auto rows_computed = fused_downsample(cpu_stream(), raw, no_table);
    for (size_t l = 0; l < rows.size(); ++l) CHECK(bit_equal(rows[l], rows_computed[l]));
  }
}

TEST_CASE("fused downsample: a plan run per sample or per batch equals the checked call", "[fused_downsample]") {
  const Tensor raw = raw_tensor({6, 8, 4, 16, 4}, DType::U16, 9);
  FusedDownsampleSpec spec;
  spec.transform = FusedTransform::Log1p;
  spec.levels = {{2, 2, 2}};
  const Tensor want = fused_downsample(cpu_stream(), raw, spec)[0];
  const FusedDownsamplePlan one = plan_fused_downsample({1, 8, 4, 16, 4}, DType::U16, spec, "test");
  const int64_t in_bytes = 8 * 4 * 16 * 4 * 2, out_elems = 4 * 4 * 2 * 8;
  Tensor per = Tensor::full(want.shape(), 7.f), batch = Tensor::full(want.shape(), 7.f);
  for (int64_t n = 0; n < 6; ++n) {
    FusedOutputs o;
    o.y[0] = per.data<float>() + n * out_elems;
    run_fused_downsample(cpu_stream(), one, static_cast<const char*>(raw.raw_data()) + n * in_bytes, o);
  }
  FusedOutputs o;
  o.y[0] = batch.data<float>();
  run_fused_downsample(cpu_stream(), one.with_samples(6), raw.raw_data(), o);
  REQUIRE(bit_equal(per, want));
  REQUIRE(bit_equal(batch, want));
  REQUIRE_THROWS_WITH(plan_fused_downsample({1, 8, 4, 16, 4}, DType::I32, spec, "plan"), Catch::Contains("int32"));
  // An empty axis: nothing to do, as the checked call (the CPU rows'
  // geometry divided by its block count: SIGFPE).
  for (const Shape& empty : {Shape{4, 0, 3}, Shape{2, 4, 4, 0, 4}}) {
    FusedDownsampleSpec flat;
    flat.levels = {std::vector<int64_t>(static_cast<size_t>(empty.ndim() - 2), 1)};
    const FusedDownsamplePlan p = plan_fused_downsample(empty, DType::F32, flat, "test");
    FusedOutputs none;
    float unused = 0.f;
    none.y[0] = &unused;
    const float in = 0.f;
    REQUIRE_NOTHROW(run_fused_downsample(cpu_stream(), p, &in, none));
    CHECK(unused == 0.f);
  }
}
