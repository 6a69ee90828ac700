// MRT's transfer with a resampled top (fusion/resample_top.h) with the
// models on the GPU: every parameter and buffer equal to the same transfer on
// the CPU (the resampling itself runs on the host; this checks the copies to
// and from the device around it).
#include <catch2/catch.hpp>

#include "fusion/resample_top.h"

using namespace mrmf;

TEST_CASE("gpu: MRT with a resampled top gives the CPU's parameters", "[gpu][resample]") {
  ModelSpec cs, ds;
  cs.name = ds.name = "neuron_inverter";
  cs.sample_shape = Shape{3, 800};
  ds.sample_shape = Shape{3, 1600};
  cs = normalized(cs);
  ds = normalized(ds);
  std::unique_ptr<Model> coarse[2];
  const Device devs[2] = {Device::cpu(), Device::cuda(0)};
  for (int i = 0; i < 2; ++i) {
    coarse[i] = build_model(cs);
    coarse[i]->build(devs[i], 3, default_init_scheme(cs));  // initialised on the host: equal bits
  }
  auto on_cpu = transfer_resampled(*coarse[0], ds, devs[0], 9);
  auto on_gpu = transfer_resampled(*coarse[1], ds, devs[1], 9);
  REQUIRE(on_gpu->params().device().is_cuda());
  for (bool buffers : {false, true}) {
    const Tensor a = buffers ? on_cpu->params().buffers() : on_cpu->params().values();
    const Tensor b = (buffers ? on_gpu->params().buffers() : on_gpu->params().values()).to(Device::cpu());
    REQUIRE(a.numel() == b.numel());
    for (int64_t k = 0; k < a.numel(); ++k) REQUIRE(a.data<float>()[k] == b.data<float>()[k]);
  }
}
