// The fused raw-data downsample on cuda:0 against the CPU backend, for every
// dtype and layout, multi-level requests (the chain kernel and the
// per-position traversal) and single levels (the GPU's single-level
// kernels), bit for bit -- log1p included since it is the project's own
// (kernels/log1p.h) rather than CUDA's log1pf and glibc's, which differed by
// an ulp; written without a GPU at hand (2026-11-27), first run pending.
// Compiles in every build.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "data/h5file.h"
#include "kernels/fused_downsample_chain.h"
#include "kernels/fused_downsample_ops.h"

using namespace mrmf;
using namespace mrmf::kernels;

namespace {
// Test data in [0, 150), plus the values whose handling the CPU tests pin
// down: -0 (each sum starts from 0.f + t, so -0 becomes +0 on both sides)
// and an f16 subnormal (half_bits_to_float's slow path).
Tensor test_values(const Shape& shape) {
  Tensor f = Tensor::empty(shape);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = static_cast<float>((i * 7919) % 300) * 0.5f;
  f.data<float>()[0] = -0.0f;
  if (f.numel() > 5) f.data<float>()[5] = 3.0e-6f;
  return f;
}

void require_same(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.shape() == cpu.shape());
  REQUIRE(std::memcmp(gpu.raw_data(), cpu.raw_data(), cpu.nbytes()) == 0);
}

// Every level of one request, on the GPU and on the CPU; on the GPU with
// each kernel that can run it (channels-last C = 4 chains of levels run the
// chain kernel, fused_downsample_chain.h: with chain_preload, the default,
// its variant that loads a block's rows up front where that applies, and
// without it two rows in flight; one level of the same runs the vector
// kernel, fused_downsample_vec.h, and with vector_preload its variant that
// loads a block's rows up front where that applies; vector_loads = false
// runs the per-position traversal).
void require_levels_same(Stream& gs, const Tensor& raw, FusedDownsampleSpec spec) {
  const auto cpu = fused_downsample(cpu_stream(), raw, spec);
  const Tensor draw = raw.to(Device::cuda(0), gs);
  struct Kernels {
    bool vec, chain_preload, vector_preload;
  };
  for (const Kernels k :
       {Kernels{true, false, false}, {true, true, false}, {true, false, true}, {false, false, false}}) {
    spec.vector_loads = k.vec;
    spec.chain_preload = k.chain_preload;
    spec.vector_preload = k.vector_preload;
    const auto gpu = fused_downsample(gs, draw, spec);
    gs.synchronize();
    REQUIRE(gpu.size() == cpu.size());
    for (size_t l = 0; l < cpu.size(); ++l) {
      INFO("level " << l << ", vector loads " << k.vec << ", chain preload " << k.chain_preload << ", vector preload "
                    << k.vector_preload);
      const Tensor g = gpu[l].to(Device::cpu(), gs);
      gs.synchronize();
      require_same(g, cpu[l]);
    }
  }
}
}  // namespace

TEST_CASE("gpu: fused downsample matches the CPU backend", "[gpu][fused_downsample]") {
  Stream gs = Stream::create(Device::cuda(0));
  // Several levels in one pass, nested ones derived from finer outputs: the
  // GPU's positions derive in the CPU rows' order (same bits).
  for (DType dt : {DType::U16, DType::I16, DType::F16, DType::F32})
    for (InputLayout lay : {InputLayout::ChannelsLast, InputLayout::ChannelsFirst})
      for (FusedTransform tf : {FusedTransform::None, FusedTransform::Scale, FusedTransform::Log1p}) {
        if (dt == DType::I16 && tf == FusedTransform::Log1p) continue;
        const Tensor raw = data::from_float32(test_values({2, 8, 8, 16, 4}), dt);
        FusedDownsampleSpec spec;
        spec.layout = lay;
        spec.transform = tf;
        const int64_t C = lay == InputLayout::ChannelsLast ? 4 : 8;
        for (int64_t k = 0; k < C; ++k) {
          spec.scale.push_back(0.37f + 0.11f * k);
          spec.shift.push_back(-1.3f + 0.7f * k);
        }
        INFO(dtype_name(dt) << " transform " << static_cast<int>(tf) << " layout " << static_cast<int>(lay));
        // A chain of three levels and one of two with an outer-axis first
        // level (the chain kernel where channels-last), and two levels that
        // are no chain (both read from the input).
        for (const std::vector<std::vector<int64_t>>& levels :
             {std::vector<std::vector<int64_t>>{{1, 1, 1}, {2, 2, 2}, {2, 2, 4}}, {{2, 1, 1}, {4, 2, 2}},
              {{2, 1, 2}, {1, 2, 4}}}) {
          spec.levels = levels;
          require_levels_same(gs, raw, spec);
        }
      }
}

TEST_CASE("gpu: chains of levels whose averages are no power of two (no FMA contraction)",
          "[gpu][fused_downsample]") {
  // 1/|block| is then inexact, so a product contracted into the next
  // level's sum would change the bits.
  Stream gs = Stream::create(Device::cuda(0));
  for (DType dt : {DType::U16, DType::F32})
    for (FusedTransform tf : {FusedTransform::None, FusedTransform::Scale}) {
      const Tensor raw = data::from_float32(test_values({2, 6, 6, 24, 4}), dt);
      FusedDownsampleSpec spec;
      spec.transform = tf;
      spec.scale = {0.37f, 0.48f, 0.59f, 0.7f};
      spec.shift = {-1.3f, -0.6f, 0.1f, 0.8f};
      for (const std::vector<std::vector<int64_t>>& levels :
           {std::vector<std::vector<int64_t>>{{3, 1, 1}, {6, 2, 2}}, {{1, 1, 1}, {3, 3, 2}, {6, 6, 4}}}) {
        spec.levels = levels;
        INFO(dtype_name(dt) << " transform " << static_cast<int>(tf) << ", " << levels.size() << " levels");
        require_levels_same(gs, raw, spec);
      }
    }
}

namespace {
// A preloading variant's cases: for each 16-bit type, transform, log1p
// computed or from the table, and (shape, levels) -- each of which the
// variant must take (`takes`) -- every kernel bit-equal to the CPU.
struct PreloadCase {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> levels;
};
void require_preload_cases(const std::vector<PreloadCase>& cases, bool (*takes)(RawType, const FusedGeom&)) {
  Stream gs = Stream::create(Device::cuda(0));
  for (DType dt : {DType::U16, DType::I16, DType::F16})
    for (FusedTransform tf : {FusedTransform::None, FusedTransform::Scale, FusedTransform::Log1p})
      for (bool table : {true, false})
        for (const PreloadCase& c : cases) {
          if (dt == DType::I16 && tf == FusedTransform::Log1p) continue;
          if (!table && tf != FusedTransform::Log1p) continue;
          const Tensor raw = data::from_float32(test_values(Shape(c.shape)), dt);
          FusedDownsampleSpec spec;
          spec.transform = tf;
          spec.scale = std::vector<float>{0.37f, 0.48f, 0.59f, 0.7f};  // move-assigned: GCC 12's -Wnonnull
          spec.shift = std::vector<float>{-1.3f, -0.6f, 0.1f, 0.8f};   // misfires on an initializer list here
          spec.levels = c.levels;
          spec.log1p_table = table;  // log1p computed on the device as well as read from the table
          const auto& last = c.levels.back();
          INFO(dtype_name(dt) << " transform " << static_cast<int>(tf) << " table " << table << " shape "
                              << Shape(c.shape).str() << ", last block " << last[0] << "x" << last[1] << "x"
                              << last[2]);
          REQUIRE(takes(raw_type_of(dt, "test"), make_fused_geom(raw.shape(), spec, "test")));
          require_levels_same(gs, raw, spec);
        }
}
}  // namespace

TEST_CASE("gpu: the chain kernel's preloading variant (blocks of 1 to 4 rows of a 16-bit type)",
          "[gpu][fused_downsample]") {
  // Written without a GPU (session 27): chains the variant takes
  // (fused_chain_preloadable), bit-equal to the CPU and to the chain
  // kernel without preloading, for each 16-bit type, transform and row count.
  require_preload_cases(
      {{{2, 8, 8, 16, 4}, {{1, 1, 1}, {2, 2, 2}}},   // 4 rows a block
       {{2, 8, 8, 16, 4}, {{2, 1, 1}, {2, 2, 2}}},   // the CosmoFlow ladder's shape: 1/2 along x, then 1/8
       {{2, 8, 8, 16, 4}, {{1, 1, 2}, {1, 2, 4}}},   // 2 rows
       {{2, 8, 8, 16, 4}, {{1, 1, 1}, {1, 1, 4}}},   // 1 row
       {{2, 6, 6, 24, 4}, {{1, 1, 1}, {3, 1, 2}}}},  // 3 rows, an average no power of two
      fused_chain_preloadable);
}

TEST_CASE("gpu: the vector kernel's preloading variant (blocks of 2 to 4 rows of a 16-bit type)",
          "[gpu][fused_downsample]") {
  // Written without a GPU (session 34): single levels the variant takes
  // (fused_vector_preloadable), bit-equal to the CPU and to the vector
  // kernel without preloading (require_levels_same runs both).
  require_preload_cases({{{2, 8, 8, 16, 4}, {{2, 2, 2}}},   // 4 rows a block: CosmoFlow's 1/8
                         {{2, 8, 8, 16, 4}, {{2, 1, 1}}},   // 2 rows: 1/2 along x
                         {{2, 8, 8, 16, 4}, {{1, 2, 1}}},   // 2 rows along y, no pooling along the last axis
                         {{2, 8, 8, 16, 4}, {{1, 2, 4}}},   // 2 rows, four positions along the last axis per output
                         {{2, 6, 6, 24, 4}, {{3, 1, 2}}}},  // 3 rows, an average no power of two
                        fused_vector_preloadable);
}

TEST_CASE("gpu: log1p of 16-bit counts by products (blocks of 4 to 15 elements) gives the CPU's bits",
          "[gpu][fused_downsample]") {
  // Written without a GPU (session 39): kernels/log1p_products.h in every
  // GPU kernel -- single levels (vector kernel, its preloading variant, the
  // per-position kernel), chains whose first level takes products, and
  // requests that are no chain -- for uint16 and int16 counts (int16 with
  // -1: -inf outputs), against the CPU rows; and the sums
  // (log1p_product = false) beside them. No int16 below -1: its NaN would
  // leave the GPU's arithmetic as CUDA's canonical NaN, the CPU's as
  // 0x7fc00000 (both NaN, not the same bits).
  Stream gs = Stream::create(Device::cuda(0));
  for (DType dt : {DType::U16, DType::I16}) {
    const Shape shape{2, 8, 8, 16, 4};
    Tensor raw = Tensor::empty(shape, dt);
    for (int64_t i = 0; i < raw.numel(); ++i) {
      const uint32_t h = static_cast<uint32_t>(i * 2654435761u) >> 8;
      const int32_t v = h % 97 == 0                        ? (dt == DType::U16 ? 65535 : 32767)
                        : h % 211 == 0 && dt == DType::I16 ? -1
                                                           : h % 40;
      static_cast<uint16_t*>(raw.raw_data())[i] = static_cast<uint16_t>(v);
    }
    for (bool product : {true, false})
      for (const std::vector<std::vector<int64_t>>& levels : {std::vector<std::vector<int64_t>>{{2, 2, 2}},
                                                              {{2, 2, 1}},
                                                              {{1, 1, 4}},
                                                              {{2, 1, 2}},
                                                              {{2, 2, 2}, {4, 4, 4}},
                                                              {{1, 2, 2}, {2, 2, 2}},
                                                              {{2, 1, 2}, {2, 2, 2}, {4, 4, 4}},
                                                              {{2, 2, 2}, {1, 2, 4}}}) {
        FusedDownsampleSpec spec;
        spec.transform = FusedTransform::Log1p;
        spec.log1p_product = product;
        spec.levels = levels;
        INFO(dtype_name(dt) << (product ? ", products" : ", sums") << ", " << levels.size() << " level(s), first "
                            << levels[0][0] << "x" << levels[0][1] << "x" << levels[0][2]);
        require_levels_same(gs, raw, spec);
      }
  }
}

TEST_CASE("gpu: fused downsample of a production-sized batch (every thread loops several times)",
          "[gpu][fused_downsample]") {
  // 12 x 128^3 x 4 uint16 (200 MB): 25 M positions at 1/1 and 3 M blocks
  // of the 1/2 + 1/8 chain, more than the grid's threads (at most 32 blocks
  // of 256 per SM), so every kernel's grid-stride loop and large indices run.
  Stream gs = Stream::create(Device::cuda(0));
  const Tensor raw = data::from_float32(test_values({12, 128, 128, 128, 4}), DType::U16);
  for (const std::vector<std::vector<int64_t>>& levels :
       {std::vector<std::vector<int64_t>>{{1, 1, 1}}, {{2, 2, 2}}, {{2, 1, 1}, {2, 2, 2}},
        {{1, 1, 1}, {2, 2, 2}, {4, 4, 4}}, {{1, 1, 1}, {1, 1, 2}, {2, 2, 2}, {4, 4, 4}}}) {
    FusedDownsampleSpec spec;
    spec.levels = levels;
    INFO("levels " << levels.size() << ", first block " << levels[0][0] << "x" << levels[0][1] << "x" << levels[0][2]);
    require_levels_same(gs, raw, spec);
  }
}

TEST_CASE("gpu: the single-level kernel gives the CPU backend's bits",
          "[gpu][fused_downsample]") {
  // One level per call: what every GPU loader runs. Without a transform and
  // with Scale (no FMA contraction on the device) and log1p (the same IEEE
  // operations on both sides) the sums are the CPU's in the CPU's order.
  Stream gs = Stream::create(Device::cuda(0));
  struct Case {
    std::vector<int64_t> shape;
    InputLayout layout;
    std::vector<int64_t> level;
  };
  const std::vector<Case> cases = {
      {{2, 8, 8, 16, 4}, InputLayout::ChannelsLast, {1, 1, 1}},   // CosmoFlow: convert + layout
      {{2, 8, 8, 16, 4}, InputLayout::ChannelsLast, {2, 2, 2}},   // 1/8
      {{2, 8, 8, 16, 4}, InputLayout::ChannelsLast, {2, 1, 1}},   // 1/2 along x
      {{2, 4, 6, 10, 7}, InputLayout::ChannelsLast, {2, 3, 5}},   // odd factors, 7 channels
      {{3, 8, 6, 6, 8}, InputLayout::ChannelsFirst, {2, 3, 2}},   // 8 channels, channels-first
      {{5, 64, 3}, InputLayout::ChannelsLast, {4}},               // Neuron Inverter (N, T, C)
      {{5, 3, 64}, InputLayout::ChannelsFirst, {2}},              // its x.view(-1, C, T) reading
  };
  for (DType dt : {DType::U16, DType::I16, DType::F16, DType::F32})
    for (FusedTransform tf : {FusedTransform::None, FusedTransform::Scale, FusedTransform::Log1p})
      for (const Case& c : cases) {
        if (dt == DType::I16 && tf == FusedTransform::Log1p) continue;
        const Tensor raw = data::from_float32(test_values(Shape(c.shape)), dt);
        FusedDownsampleSpec spec;
        spec.layout = c.layout;
        spec.transform = tf;
        const int64_t C = c.layout == InputLayout::ChannelsLast ? c.shape.back() : c.shape[1];
        for (int64_t k = 0; k < C; ++k) {
          spec.scale.push_back(0.37f + 0.11f * k);
          spec.shift.push_back(-1.3f + 0.7f * k);
        }
        spec.levels = {c.level};
        INFO(dtype_name(dt) << " transform " << static_cast<int>(tf) << " shape " << Shape(c.shape).str());
        const Tensor cpu = fused_downsample(cpu_stream(), raw, spec)[0];
        // Channels-last C = 4 runs the vector kernel by default; both GPU
        // single-level kernels are checked.
        for (bool vec : {true, false}) {
          spec.vector_loads = vec;
          INFO("vector loads " << vec);
          const Tensor gpu = fused_downsample(gs, raw.to(Device::cuda(0), gs), spec)[0].to(Device::cpu(), gs);
          gs.synchronize();
          require_same(gpu, cpu);
        }
      }
}

TEST_CASE("gpu: the vector kernel's fallback for inputs not 16-byte aligned", "[gpu][fused_downsample]") {
  // A raw pointer 8 bytes into a device buffer (a loader's sample inside a
  // larger buffer, say): the 16-byte loads would fault, so the per-position
  // kernel runs instead, with the same result.
  Stream gs = Stream::create(Device::cuda(0));
  const Tensor raw = data::from_float32(test_values({2, 4, 4, 16, 4}), DType::U16);
  FusedDownsampleSpec spec;
  spec.levels = {{1, 1, 2}};
  const Tensor cpu = fused_downsample(cpu_stream(), raw, spec)[0];
  Tensor padded = Tensor::empty({raw.numel() + 4}, DType::U16);
  std::memcpy(static_cast<uint16_t*>(padded.raw_data()) + 4, raw.raw_data(), raw.nbytes());
  const Tensor dpad = padded.to(Device::cuda(0), gs);
  const FusedDownsamplePlan plan = plan_fused_downsample(raw.shape(), DType::U16, spec, "test");
  Tensor y = Tensor::empty(cpu.shape(), DType::F32, Device::cuda(0));
  FusedOutputs o;
  o.y[0] = y.data<float>();
  run_fused_downsample(gs, plan, static_cast<const uint16_t*>(dpad.raw_data()) + 4, o);
  const Tensor back = y.to(Device::cpu(), gs);
  gs.synchronize();
  require_same(back, cpu);
}
