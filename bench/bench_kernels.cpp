// Kernel harness in the spirit of llm.c's dev/cuda benchmarks: for each op,
// first validate the result against the plain-loop reference, then time it
// and report the effective bandwidth (minimum bytes moved / time) next to a
// copy of the same number of bytes measured in the same run: a parallel
// memcpy on the CPU, a device-to-device copy on a GPU. Target: >= 80 % of
// the copy bandwidth for pooling and element-wise ops.
//
//   bench_kernels [--reps N] [--small]      (--small: 1/8 of the batch, quick)
// Runs on the CPU always, and on cuda:0 when the build and the machine have one.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/common/timing.h"
#include "core/device.h"
#include "kernels/batchnorm_ops.h"
#include "kernels/dropout_ops.h"
#include "kernels/elementwise_ops.h"
#include "kernels/fused_epilogue_ops.h"
#include "kernels/philox.h"
#include "kernels/pooling_ops.h"
#include "kernels/reduce_resolution_ops.h"
#include "tests/support/reference_pool_bn.h"

using namespace mrmf;
using kernels::PoolKind;
using kernels::PoolParams;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * kernels::philox_uniform(seed, 3, uint64_t(i));
  return t;
}

double max_rel(const Tensor& got, const Tensor& want) {
  Tensor g = got.to(Device::cpu());
  const float* a = g.data<float>();
  const float* b = want.data<float>();
  double m = 0, mb = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    mb = std::max(mb, std::fabs(double(b[i])));
  }
  return m / (mb + 1e-12);
}

struct Op {
  std::string name;
  double bytes;                      // minimum traffic
  std::function<void()> run;         // on the suite's device
  std::function<double()> error;     // max relative error vs the reference after run()
  double tol;
};

struct Host {
  Shape ni_in{512, 30, 1597}, cf_in{4, 16, 64, 64, 64};
  PoolParams p1 = PoolParams::make_1d(4), p3 = PoolParams::make_3d({2, 2, 2});
  Shape ni_out, cf_out, red_out;
  Tensor x1, dy1, x3, dy3, gamma, beta, mean, var, invstd;
  // references
  Tensor mp_y, mp_dx, ap_y, ap_dx, fz_y, fz_dz, bn_y, relu_y, red_y;
  Host(bool small) {
    if (small) ni_in = Shape{64, 30, 1597}, cf_in = Shape{1, 8, 64, 64, 64};
    ni_out = kernels::pool_output_shape(ni_in, p1, "bench");
    cf_out = kernels::pool_output_shape(cf_in, p3, "bench");
    red_out = kernels::reduce_resolution_shape(ni_in, {2}, "bench");
    x1 = rnd(ni_in, 1), dy1 = rnd(ni_out, 2), x3 = rnd(cf_in, 3), dy3 = rnd(cf_out, 4);
    gamma = rnd({30}, 5, 0.5f, 1.5f), beta = rnd({30}, 6), mean = rnd({30}, 7), var = rnd({30}, 8, 0.5f, 2.f);
    invstd = Tensor::empty({30});
    for (int c = 0; c < 30; ++c) invstd.data<float>()[c] = 1.f / std::sqrt(var.data<float>()[c] + 1e-5f);
    auto v = [](const Tensor& t) { return std::vector<double>(t.data<float>(), t.data<float>() + t.numel()); };
    std::printf("computing plain-loop references ...\n");
    mp_y = ref::pool_forward(x1, true, p1);
    mp_dx = ref::pool_backward(x1, dy1, true, p1);
    ap_y = ref::pool_forward(x3, false, p3);
    ap_dx = ref::pool_backward(x3, dy3, false, p3);
    bn_y = ref::bn_apply(x1, v(mean), v(var), v(gamma), v(beta), 1e-5);
    relu_y = ref::leaky_relu(x1, 0.0);
    const Tensor z = ref::leaky_relu(bn_y, 0.0);
    fz_y = ref::pool_forward(z, true, p1);
    // dz = pool-backward of relu(bn(x)) times relu'(bn(x))
    fz_dz = ref::pool_backward(z, dy1, true, p1);
    for (int64_t i = 0; i < fz_dz.numel(); ++i)
      if (!(bn_y.data<float>()[i] > 0.f)) fz_dz.data<float>()[i] = 0.f;
    red_y = ref::reduce_resolution(x1, {2});
  }
};

void run_suite(const Host& h, Device d, int reps) {
  Stream s = d.is_cuda() ? Stream::create(d) : Stream();
  auto up = [&](const Tensor& t) { return d.is_cuda() ? t.to(d, s) : t; };
  auto empty = [&](const Shape& sh, DType dt = DType::F32) { return Tensor::empty(sh, dt, d); };
  const Tensor x1 = up(h.x1), dy1 = up(h.dy1), x3 = up(h.x3), dy3 = up(h.dy3);
  const Tensor gamma = up(h.gamma), beta = up(h.beta), mean = up(h.mean), invstd = up(h.invstd);
  Tensor y1 = empty(h.ni_out), arg1 = empty(h.ni_out, DType::I32), dx1 = empty(h.ni_in), full1 = empty(h.ni_in);
  Tensor y3 = empty(h.cf_out), dx3 = empty(h.cf_in), red = empty(h.red_out);
  const double n1 = double(h.ni_in.numel()), o1 = double(h.ni_out.numel());
  const double n3 = double(h.cf_in.numel()), o3 = double(h.cf_out.numel());
  kernels::EpilogueSpec spec;
  spec.act = true;
  spec.pool = PoolKind::Max;
  spec.pool_params = h.p1;

  std::vector<Op> ops = {
      {"maxpool1d fwd k4 " + h.ni_in.str(), 4 * n1 + 8 * o1,
       [&] { kernels::max_pool_forward(s, x1, y1, arg1, h.p1); }, [&] { return max_rel(y1, h.mp_y); }, 0},
      {"maxpool1d bwd k4", 4 * n1 + 8 * o1, [&] { kernels::max_pool_backward(s, dy1, arg1, dx1, h.p1); },
       [&] { return max_rel(dx1, h.mp_dx); }, 0},
      {"avgpool3d fwd k2 " + h.cf_in.str(), 4 * n3 + 4 * o3, [&] { kernels::avg_pool_forward(s, x3, y3, h.p3); },
       [&] { return max_rel(y3, h.ap_y); }, 1e-6},
      {"avgpool3d bwd k2", 4 * n3 + 4 * o3, [&] { kernels::avg_pool_backward(s, dy3, dx3, h.p3); },
       [&] { return max_rel(dx3, h.ap_dx); }, 1e-6},
      {"fused bn+relu+maxpool1d fwd", 4 * n1 + 8 * o1,
       [&] { kernels::fused_epilogue_forward(s, x1, mean, invstd, gamma, beta, y1, arg1, spec); },
       [&] { return max_rel(y1, h.fz_y); }, 1e-5},
      {"fused bn+relu+maxpool1d bwd", 8 * n1 + 8 * o1,
       [&] { kernels::fused_epilogue_backward(s, x1, dy1, arg1, mean, invstd, gamma, beta, dx1, spec); },
       [&] { return max_rel(dx1, h.fz_dz); }, 1e-6},
      {"batchnorm apply", 8 * n1, [&] { kernels::batchnorm_apply(s, x1, mean, invstd, gamma, beta, full1); },
       [&] { return max_rel(full1, h.bn_y); }, 1e-5},
      {"relu", 8 * n1, [&] { kernels::leaky_relu_forward(s, x1, full1, 0.f); }, [&] { return max_rel(full1, h.relu_y); },
       0},
      {"dropout p=0.1", 8 * n1, [&] { kernels::dropout_apply(s, x1, full1, 1, 2, 0.1f); },
       [&] {  // kept elements scaled, ~10 % dropped
         Tensor g = full1.to(Device::cpu(), s);
         s.synchronize();
         int64_t dropped = 0;
         double err = 0;
         for (int64_t i = 0; i < g.numel(); ++i) {
           const float v = g.data<float>()[i];
           if (v == 0.f) ++dropped;
           else err = std::max(err, std::fabs(double(v) - h.x1.data<float>()[i] / 0.9));
         }
         return std::fabs(double(dropped) / g.numel() - 0.1) > 0.005 ? 1.0 : err;
       }, 1e-6},
      {"reducer x2 (time)", 4 * n1 + 4 * double(h.red_out.numel()),
       [&] { kernels::reduce_resolution_forward(s, x1, red, {2}); }, [&] { return max_rel(red, h.red_y); }, 1e-6},
  };

  std::printf("\n== %s (%d threads) ==\n", d.str().c_str(), d.is_cuda() ? 0 : omp_get_max_threads());
  std::printf("%-40s %9s %9s %9s %8s %10s\n", "op", "ms", "GB/s", "copyGB/s", "ratio", "max rel err");
  for (const Op& op : ops) {
    op.run();
    s.synchronize();
    const double err = op.error();
    if (err > op.tol) {
      std::printf("%-40s VALIDATION FAILED: max rel error %.3g > %.3g\n", op.name.c_str(), err, op.tol);
      continue;
    }
    const double t = bench::best_time(s, reps, op.run);
    // The same number of bytes through a plain copy (half read, half written).
    const int64_t half = static_cast<int64_t>(op.bytes / 8);
    Tensor src = empty({half}), dst = empty({half});
    if (d.is_cuda()) {
      src.zero_(s);
    } else {
      std::memset(src.raw_data(), 0, src.nbytes());
    }
    const double tc = bench::best_time(s, reps, [&] {
      if (d.is_cuda()) {
        dst.copy_from(src, s);
        return;
      }
      bench::par_memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    });
    const double gbs = op.bytes / t * 1e-9, cgbs = op.bytes / tc * 1e-9;
    std::printf("%-40s %9.3f %9.1f %9.1f %7.0f%% %10.2g\n", op.name.c_str(), t * 1e3, gbs, cgbs, 100 * gbs / cgbs, err);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--small")) small = true;
  }
  try {
    const Host h(small);
    run_suite(h, Device::cpu(), reps);
    if (built_with_cuda() && cuda_device_count() > 0) run_suite(h, Device::cuda(0), reps * 4);
    else std::printf("\n(no CUDA device: %s)\n", built_with_cuda() ? cuda_unavailable_reason().c_str() : "CPU build");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
