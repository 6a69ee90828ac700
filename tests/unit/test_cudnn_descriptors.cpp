// cuDNN descriptor and shape code, checked on the host: descriptor creation
// and queries need no GPU, so CUDA builds test this on CPU-only CI machines.
#ifdef MRMF_HAVE_CUDA
#include <catch2/catch.hpp>

#include "layers/conv.h"
#include "layers/conv_cudnn.h"
#include "layers/cudnn_descriptors.h"

using namespace mrmf;

namespace {
struct NdDesc {
  std::vector<int> dims, strides;
};

NdDesc query(const cudnn::TensorDesc& d) {
  NdDesc r;
  r.dims.resize(8);
  r.strides.resize(8);
  int n = 0;
  cudnnDataType_t t;
  MRMF_CUDNN_CHECK(cudnnGetTensorNdDescriptor(d, 8, &t, &n, r.dims.data(), r.strides.data()));
  CHECK(t == CUDNN_DATA_FLOAT);
  r.dims.resize(static_cast<size_t>(n));
  r.strides.resize(static_cast<size_t>(n));
  return r;
}
}  // namespace

TEST_CASE("cudnn descriptors: tensor dims and strides round-trip", "[cudnn]") {
  SECTION("1-D [N, C, L] -> [N, C, 1, L]") {
    auto r = query(cudnn::TensorDesc(Shape{2, 3, 17}));
    CHECK(r.dims == std::vector<int>{2, 3, 1, 17});
    CHECK(r.strides == std::vector<int>{51, 17, 17, 1});
  }
  SECTION("3-D [N, C, D, H, W]") {
    auto r = query(cudnn::TensorDesc(Shape{2, 3, 4, 5, 6}));
    CHECK(r.dims == std::vector<int>{2, 3, 4, 5, 6});
    CHECK(r.strides == std::vector<int>{360, 120, 30, 6, 1});
  }
  SECTION("flat [N, F] -> [N, F, 1, 1]") {
    auto r = query(cudnn::TensorDesc(Shape{8, 10}));
    CHECK(r.dims == std::vector<int>{8, 10, 1, 1});
    CHECK(r.strides == std::vector<int>{10, 1, 1, 1});
  }
  SECTION("out-of-range shapes are Shape errors") {
    REQUIRE_THROWS_WITH(cudnn::TensorDesc(Shape{5}), Catch::Contains("unsupported shape") && Catch::Contains("[5]"));
    REQUIRE_THROWS_WITH(cudnn::TensorDesc(Shape{2, 0, 3}), Catch::Contains("out of range"));
    // CosmoFlow's first conv output at 128^3 with batch 64: 2^31 elements.
    REQUIRE_THROWS_WITH(cudnn::TensorDesc(Shape{64, 16, 128, 128, 128}),
                        Catch::Contains("more than 2^31 - 1") && Catch::Contains("smaller batch"));
    CHECK_NOTHROW(cudnn::TensorDesc(Shape{63, 16, 128, 128, 128}));
  }
}

TEST_CASE("cudnn descriptors: filter and convolution descriptors", "[cudnn]") {
  cudnn::FilterDesc w(Shape{30, 3, 4});
  std::vector<int> dims(8);
  int n = 0;
  cudnnDataType_t t;
  cudnnTensorFormat_t f;
  MRMF_CUDNN_CHECK(cudnnGetFilterNdDescriptor(w, 8, &t, &f, &n, dims.data()));
  dims.resize(static_cast<size_t>(n));
  CHECK(dims == std::vector<int>{30, 3, 1, 4});
  CHECK(f == CUDNN_TENSOR_NCHW);

  Conv3d c3(4, 8, {3, 2, 1}, {2, 1, 1}, {1, 0, 0});
  auto [pad, stride] = cudnn_conv::pad_stride(c3.spec());
  CHECK(pad == std::vector<int>{1, 0, 0});
  CHECK(stride == std::vector<int>{2, 1, 1});
  cudnn::ConvDesc conv(pad, stride, false);
  std::vector<int> p(3), s(3), dil(3);
  cudnnConvolutionMode_t mode;
  MRMF_CUDNN_CHECK(cudnnGetConvolutionNdDescriptor(conv, 3, &n, p.data(), s.data(), dil.data(), &mode, &t));
  CHECK(n == 3);
  CHECK(p == pad);
  CHECK(s == stride);
  CHECK(dil == std::vector<int>{1, 1, 1});
  CHECK(mode == CUDNN_CROSS_CORRELATION);
  cudnnMathType_t math;
  MRMF_CUDNN_CHECK(cudnnGetConvolutionMathType(conv, &math));
  CHECK(math == CUDNN_FMA_MATH);  // strict FP32 unless tensor ops are allowed

  Conv1d c1(3, 30, 4, 2, 1);
  auto ps1 = cudnn_conv::pad_stride(c1.spec());
  CHECK(ps1.first == std::vector<int>{0, 1});
  CHECK(ps1.second == std::vector<int>{1, 2});
}

TEST_CASE("cudnn descriptors: cuDNN's output size equals the layer's output_shape", "[cudnn]") {
  std::vector<std::pair<std::unique_ptr<Conv>, Shape>> cases;
  cases.emplace_back(std::make_unique<Conv1d>(3, 30, 4), Shape{512, 3, 1600});
  cases.emplace_back(std::make_unique<Conv1d>(3, 30, 4, 2, 1), Shape{2, 3, 15});
  cases.emplace_back(std::make_unique<Conv1d>(2, 5, 3, 2, 0), Shape{4, 2, 8});
  cases.emplace_back(std::make_unique<Conv3d>(16, 32, 3, 1, 1), Shape{8, 16, 32, 32, 32});
  cases.emplace_back(std::make_unique<Conv3d>(4, 8, 3, 2, 1), Shape{1, 4, 7, 6, 5});
  cases.emplace_back(std::make_unique<Conv3d>(4, 8, std::vector<int64_t>{3, 2, 1}, std::vector<int64_t>{2, 1, 1},
                                              std::vector<int64_t>{1, 0, 0}),
                     Shape{2, 4, 9, 4, 3});
  for (auto& [conv, xs] : cases) {
    INFO(conv->type() << " input " << xs.str());
    const Shape ys = conv->output_shape(xs);
    cudnn::TensorDesc x(xs);
    cudnn::FilterDesc w(conv->spec().weight_shape());
    auto [pad, stride] = cudnn_conv::pad_stride(conv->spec());
    cudnn::ConvDesc cd(pad, stride, false);
    std::vector<int> out(x.dims().size());
    MRMF_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(cd, x, w, static_cast<int>(out.size()), out.data()));
    CHECK(out == cudnn::cudnn_dims(ys));
  }
}

TEST_CASE("cudnn descriptors: derived batch-norm descriptor is per channel", "[cudnn]") {
  for (const Shape& s : {Shape{8, 10}, Shape{4, 6, 33}, Shape{2, 5, 3, 4, 6}}) {
    INFO(s.str());
    cudnn::TensorDesc x(s), bn;
    MRMF_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bn, x, CUDNN_BATCHNORM_SPATIAL));
    auto r = query(bn);
    std::vector<int> want(x.dims().size(), 1);
    want[1] = static_cast<int>(s[1]);
    CHECK(r.dims == want);
  }
}
#endif  // MRMF_HAVE_CUDA
