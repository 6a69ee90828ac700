// The fused downsample's functor traversals (the GPU's math) run on the
// CPU, one call at a time, for tests that compare them with the CPU rows
// bit for bit (tests/unit/test_fused_downsample.cpp, test_simd_rows.cpp,
// test_log1p_products.cpp).
#pragma once

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "core/tensor.h"
#include "data/formats.h"
#include "kernels/fused_downsample_chain.h"
#include "kernels/fused_downsample_ops.h"

namespace mrmf::kernels::test {

// A test input of shape s in stored type dt: integers 0..999 (int16:
// -500..499; float16 and float32: hundredths), a hash of the index and seed.
inline Tensor raw_tensor(const Shape& s, DType dt, uint64_t seed) {
  Tensor f = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < f.numel(); ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) + seed) * 2654435761u % 1000;
    f.data<float>()[i] = dt == DType::I16
                             ? static_cast<float>(h) - 500.f
                             : static_cast<float>(h) * (dt == DType::F16 || dt == DType::F32 ? 0.01f : 1.f);
  }
  return data::from_float32(f, dt);
}

// The GPU path's math on the CPU, one call at a time: operator() over one
// coarse position per call (Full), the single-level kernel
// (FusedDownsampleOne; One), or the vector kernel (FusedDownsampleVec; Vec:
// one level, channels-last C = 4, kV outputs per call; VecPreload: its
// variant that loads a block's rows up front), or the chain kernel
// (FusedDownsampleChain; Chain: a chain of levels, channels-last C = 4;
// ChainPreload: its variant that loads a block's rows up front).
enum class Traversal { Full, One, Vec, VecPreload, Chain, ChainPreload };

// table: log1p from log1p_table() (FusedDownsample::lut, as the backends
// run it for 16-bit types), else computed per element.
template <RawType R, FusedTransform TF>
void by_functor(const Tensor& x, const FusedDownsampleSpec& spec, const std::vector<Tensor>& ys, Traversal t,
                bool table) {
  FusedGeom g = make_fused_geom(x.shape(), spec, "test");
  g.chunk = 1;
  const bool vec = t == Traversal::Vec || t == Traversal::VecPreload;
  if (vec) {  // kV outputs per call, as the GPU dispatch sets it
    const int64_t f2 = fused_vector_f2(g);
    REQUIRE(f2 != 0);
    g.chunk = fused_vector_width(f2);
    g.vector_preload = t == Traversal::VecPreload;
    if (g.vector_preload) REQUIRE(fused_vector_preloadable(R, g));
  }
  const bool chain = t == Traversal::Chain || t == Traversal::ChainPreload;
  if (chain) {  // 4 input positions per call, as the GPU dispatch sets it
    REQUIRE(fused_chain_levels(g) == g.levels);
    g.chunk = kFusedChainVoxels / g.block[2];
    g.chain_preload = t == Traversal::ChainPreload;
    if (g.chain_preload) REQUIRE(fused_chain_preloadable(R, g));
  }
  g.finalize();
  FusedDownsample<R, TF> f{static_cast<const typename RawLoad<R>::T*>(x.raw_data()), {}, g};
  for (size_t l = 0; l < ys.size(); ++l) f.o.y[l] = ys[l].data<float>();
  if (table) f.lut = log1p_table(R);
  if (vec) {
    with_vector_kernel(f, [&](const auto& k) {
      for (int64_t i = 0; i < g.calls(); ++i) k(i);
    });
    return;
  }
  if (chain) {
    with_chain_kernel(f, [&](const auto& k) {
      for (int64_t i = 0; i < g.calls(); ++i) k(i);
    });
    return;
  }
  const FusedDownsampleOne<R, TF> f1{f};
  for (int64_t i = 0; i < g.calls(); ++i)
    if (t == Traversal::One)
      f1(i);
    else
      f(i);
}

template <RawType R>
void by_functor_tf(const Tensor& x, const FusedDownsampleSpec& spec, const std::vector<Tensor>& ys, Traversal t,
                   bool table) {
  switch (spec.transform) {
    case FusedTransform::None: by_functor<R, FusedTransform::None>(x, spec, ys, t, table); break;
    case FusedTransform::Log1p: by_functor<R, FusedTransform::Log1p>(x, spec, ys, t, table); break;
    case FusedTransform::Scale: by_functor<R, FusedTransform::Scale>(x, spec, ys, t, table); break;
  }
}

// The functor traversal (the GPU's math) on the CPU, outputs shaped like `like`.
inline std::vector<Tensor> by_functor_any(const Tensor& raw, const FusedDownsampleSpec& spec,
                                          const std::vector<Tensor>& like, Traversal t, bool table = false) {
  std::vector<Tensor> ys;
  for (const Tensor& y : like) ys.push_back(Tensor::full(y.shape(), 7.f));
  switch (raw_type_of(raw.dtype(), "test")) {
    case RawType::U16: by_functor_tf<RawType::U16>(raw, spec, ys, t, table); break;
    case RawType::I16: by_functor_tf<RawType::I16>(raw, spec, ys, t, table); break;
    case RawType::F16: by_functor_tf<RawType::F16>(raw, spec, ys, t, table); break;
    case RawType::F32: by_functor_tf<RawType::F32>(raw, spec, ys, t, table); break;
  }
  return ys;
}

inline bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}
}  // namespace mrmf::kernels::test
