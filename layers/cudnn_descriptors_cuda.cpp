#include "layers/cudnn_descriptors.h"

namespace mrmf::cudnn {

std::vector<int> cudnn_dims(const Shape& s) {
  MRMF_CHECK_KIND(Shape, s.ndim() >= 2 && s.ndim() <= 5, "cuDNN descriptor: unsupported shape ", s.str());
  std::vector<int> d;
  for (int i = 0; i < s.ndim(); ++i) {
    MRMF_CHECK_KIND(Shape, s[i] > 0 && s[i] <= INT32_MAX, "cuDNN descriptor: dimension ", s[i], " of ", s.str(),
                    " is out of range");
    d.push_back(static_cast<int>(s[i]));
  }
  if (d.size() == 2) {  // [N, F] -> [N, F, 1, 1]
    d.push_back(1);
    d.push_back(1);
  } else if (d.size() == 3) {  // [N, C, L] -> [N, C, 1, L]
    d.insert(d.begin() + 2, 1);
  }
  return d;
}

void TensorDesc::set(const Shape& s) {
  dims_ = cudnn_dims(s);
  std::vector<int> strides(dims_.size());
  int64_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    strides[i] = static_cast<int>(acc);
    acc *= dims_[i];
    // cuDNN's descriptors hold int strides: a tensor past 2^31 elements (say
    // CosmoFlow's first conv output at 128^3 with batch >= 64 per GPU) is
    // named here rather than left to a cuDNN status.
    MRMF_CHECK_KIND(Shape, acc <= INT32_MAX, "cuDNN tensor ", s.str(), " has more than 2^31 - 1 ",
                    "elements, which cuDNN's descriptors cannot address; use a smaller batch per GPU");
  }
  MRMF_CUDNN_CHECK(cudnnSetTensorNdDescriptor(get(), CUDNN_DATA_FLOAT, static_cast<int>(dims_.size()), dims_.data(),
                                              strides.data()));
}

void FilterDesc::set(const Shape& w) {
  dims_ = cudnn_dims(w);
  MRMF_CUDNN_CHECK(
      cudnnSetFilterNdDescriptor(get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(dims_.size()), dims_.data()));
}

void ConvDesc::set(const std::vector<int>& pad, const std::vector<int>& stride, bool allow_tensor_ops) {
  MRMF_CHECK_KIND(Shape, pad.size() == stride.size() && (pad.size() == 2 || pad.size() == 3),
                  "cuDNN convolution descriptor: ", pad.size(), " pads and ", stride.size(), " strides");
  std::vector<int> dilation(pad.size(), 1);
  MRMF_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(get(), static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                   dilation.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // FP32 stays FP32 unless TF32 is explicitly allowed.
  MRMF_CUDNN_CHECK(cudnnSetConvolutionMathType(get(), allow_tensor_ops ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                                       : CUDNN_FMA_MATH));
}

}  // namespace mrmf::cudnn
