// The cuDNN batch-norm functions against a double-precision host computation
// of PyTorch's BatchNorm (training forward, running statistics, backward,
// inference). CUDA builds only; runs where a GPU exists.
#ifdef MRMF_HAVE_CUDA
#include <catch2/catch.hpp>
#include <cmath>

#include "layers/batchnorm_cudnn.h"
#include "support/finite_diff.h"
#include "support/reference_ops.h"

using namespace mrmf;

TEST_CASE("cudnn_bn: matches PyTorch semantics", "[gpu][bn]") {
  for (const Shape& s : {Shape{16, 5}, Shape{4, 3, 33}, Shape{2, 4, 3, 5, 6}}) {
    INFO(s.str());
    const int64_t N = s[0], C = s[1], inner = s.numel() / (N * C), M = N * inner;
    const double momentum = 0.1, eps = 1e-5;
    Context ctx(Device::cuda(0));
    auto dev = [&](const Tensor& t) { return t.to(ctx.device(), ctx.stream()); };
    Tensor x = test::random_tensor(s, 1, -2.f, 3.f), dy = test::random_tensor(s, 2);
    Tensor gamma = test::random_tensor({C}, 3, 0.5f, 1.5f), beta = test::random_tensor({C}, 4);
    Tensor rm = test::random_tensor({C}, 5), rv = test::random_tensor({C}, 6, 0.5f, 2.f);
    Tensor gx = dev(x), gdy = dev(dy), gg = dev(gamma), gb = dev(beta), grm = dev(rm), grv = dev(rv);
    Tensor y = Tensor::empty(s, DType::F32, ctx.device()), dx = Tensor::empty(s, DType::F32, ctx.device());
    Tensor sm = Tensor::empty({C}, DType::F32, ctx.device()), si = Tensor::empty({C}, DType::F32, ctx.device());
    Tensor dg = Tensor::empty({C}, DType::F32, ctx.device()), db = Tensor::empty({C}, DType::F32, ctx.device());
    cudnn_bn::forward_training(ctx, gx, gg, gb, grm, grv, momentum, eps, y, sm, si);
    cudnn_bn::backward(ctx, gx, gdy, gg, sm, si, eps, dx, dg, db);
    Tensor yi = Tensor::empty(s, DType::F32, ctx.device());
    cudnn_bn::forward_inference(ctx, gx, gg, gb, grm, grv, eps, yi);

    // Host reference in double.
    auto xv = ref::to_vec(x), dyv = ref::to_vec(dy), gv = ref::to_vec(gamma), bv = ref::to_vec(beta);
    auto rmv = ref::to_vec(rm), rvv = ref::to_vec(rv);
    std::vector<double> yv(xv.size()), dxv(xv.size()), dgv(C), dbv(C), yiv(xv.size());
    auto idx = [&](int64_t n, int64_t c, int64_t i) { return static_cast<size_t>((n * C + c) * inner + i); };
    for (int64_t c = 0; c < C; ++c) {
      double mean = 0, var = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) mean += xv[idx(n, c, i)];
      mean /= M;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) var += std::pow(xv[idx(n, c, i)] - mean, 2);
      const double invstd = 1 / std::sqrt(var / M + eps);
      double sdy = 0, sdyxh = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t k = idx(n, c, i);
          const double xh = (xv[k] - mean) * invstd;
          yv[k] = gv[c] * xh + bv[c];
          sdy += dyv[k];
          sdyxh += dyv[k] * xh;
        }
      dgv[c] = sdyxh;
      dbv[c] = sdy;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t k = idx(n, c, i);
          const double xh = (xv[k] - mean) * invstd;
          dxv[k] = gv[c] * invstd * (dyv[k] - sdy / M - xh * sdyxh / M);
        }
      rmv[c] = (1 - momentum) * rmv[c] + momentum * mean;
      rvv[c] = (1 - momentum) * rvv[c] + momentum * var / (M - 1);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t k = idx(n, c, i);
          yiv[k] = gv[c] * (xv[k] - rmv[c]) / std::sqrt(rvv[c] + eps) + bv[c];
        }
    }
    auto host = [&](const Tensor& t) {
      Tensor h = t.to(Device::cpu(), ctx.stream());
      ctx.stream().synchronize();
      return h;
    };
    CHECK(test::max_rel_diff(host(y), ref::from_vec(yv, s)) < 1e-4);
    CHECK(test::max_rel_diff(host(dx), ref::from_vec(dxv, s)) < 1e-4);
    CHECK(test::max_rel_diff(host(dg), ref::from_vec(dgv, {C})) < 1e-4);
    CHECK(test::max_rel_diff(host(db), ref::from_vec(dbv, {C})) < 1e-4);
    CHECK(test::max_rel_diff(host(grm), ref::from_vec(rmv, {C})) < 1e-5);
    CHECK(test::max_rel_diff(host(grv), ref::from_vec(rvv, {C})) < 1e-5);
    CHECK(test::max_rel_diff(host(yi), ref::from_vec(yiv, s)) < 1e-4);
  }
}
#endif  // MRMF_HAVE_CUDA
