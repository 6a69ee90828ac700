// The fused raw-data downsample on cuda:0 against the CPU backend, for every
// dtype and layout and a multi-level request. Compiles in every build.
#include <catch2/catch.hpp>
#include <cmath>

#include "data/h5file.h"
#include "kernels/fused_downsample_ops.h"

using namespace mrmf;
using namespace mrmf::kernels;

TEST_CASE("gpu: fused downsample matches the CPU backend", "[gpu][fused_downsample]") {
  Stream gs = Stream::create(Device::cuda(0));
  for (DType dt : {DType::U16, DType::I16, DType::F16, DType::F32})
    for (InputLayout lay : {InputLayout::ChannelsLast, InputLayout::ChannelsFirst}) {
      Tensor f = Tensor::empty({2, 8, 8, 16, 4});
      for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = static_cast<float>((i * 7919) % 300) * 0.5f;
      const Tensor raw = data::from_float32(f, dt);
      FusedDownsampleSpec spec;
      spec.layout = lay;
      spec.transform = FusedTransform::Log1p;
      spec.levels = {{1, 1, 1}, {2, 2, 2}, {2, 2, 4}};
      if (dt == DType::I16) spec.transform = FusedTransform::None;
      const auto cpu = fused_downsample(cpu_stream(), raw, spec);
      const auto gpu = fused_downsample(gs, raw.to(Device::cuda(0), gs), spec);
      gs.synchronize();
      for (size_t l = 0; l < cpu.size(); ++l) {
        const Tensor g = gpu[l].to(Device::cpu(), gs);
        gs.synchronize();
        REQUIRE(g.shape() == cpu[l].shape());
        double worst = 0;
        for (int64_t i = 0; i < g.numel(); ++i)
          worst = std::max(worst, std::fabs(double(g.data<float>()[i]) - cpu[l].data<float>()[i]) /
                                      (1 + std::fabs(double(cpu[l].data<float>()[i]))));
        REQUIRE(worst < 1e-5);
      }
    }
}
