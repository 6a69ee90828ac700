// Element conversions of data files' types (declared in data/h5file.h):
// IEEE half <-> float32 bit by bit (round to nearest even, subnormals,
// inf and NaN kept), and whole tensors to and from float32 -- the
// offline reducer's and the formats' readers' conversions, apart from
// the loaders' own (data/loader_batches.cpp) and the fused kernel's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "data/h5file.h"

namespace mrmf::data {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal half: normalise into a float32 normal.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u));
  if (absx >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504 -> inf
  if (absx < 0x38800000u) {
    // Result is subnormal (or zero): shift the implicit-1 mantissa, round to nearest even.
    if (absx < 0x33000000u) return sign;  // below half of the smallest subnormal
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14 + (112 - e)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // carries into the exponent correctly
  return static_cast<uint16_t>(sign | r);
}

Tensor to_float32(const Tensor& t) {
  MRMF_CHECK(!t.device().is_cuda(), "to_float32 expects a CPU tensor, got ", t.str());
  const Tensor src = t.is_contiguous() ? t : t.contiguous();
  Tensor out = Tensor::empty(src.shape(), DType::F32);
  float* o = out.data<float>();
  const int64_t n = src.numel();
  switch (src.dtype()) {
    case DType::F32: std::memcpy(o, src.raw_data(), src.nbytes()); break;
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src.raw_data());
      for (int64_t i = 0; i < n; ++i) o[i] = half_to_float(s[i]);
      break;
    }
    case DType::U16: {
      const auto* s = src.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
      break;
    }
    case DType::I16: {
      const auto* s = src.data<int16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
      break;
    }
    default: MRMF_THROW(Data, "to_float32: unsupported dtype ", dtype_name(src.dtype()));
  }
  return out;
}

namespace {
// s rounded to the nearest integers (ties to even) and clamped to T's
// range into o (in double, which holds every int32 bound exactly). A NaN
// is a Data error: no integer stands for it (and converting it would be
// undefined behaviour).
template <class T>
void round_clamp(const float* s, int64_t n, T* o, DType dtype) {
  constexpr double lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (int64_t i = 0; i < n; ++i) {
    MRMF_CHECK_KIND(Data, !std::isnan(s[i]), "from_float32: element ", i, " is NaN, which ", dtype_name(dtype),
                    " cannot hold");
    o[i] = static_cast<T>(std::clamp(static_cast<double>(std::nearbyint(s[i])), lo, hi));
  }
}
}  // namespace

Tensor from_float32(const Tensor& t, DType dtype) {
  MRMF_CHECK(t.dtype() == DType::F32 && t.is_contiguous() && !t.device().is_cuda(),
             "from_float32 expects a contiguous float32 CPU tensor, got ", t.str());
  if (dtype == DType::F32) return t;
  Tensor out = Tensor::empty(t.shape(), dtype);
  const float* s = t.data<float>();
  const int64_t n = t.numel();
  switch (dtype) {
    case DType::F16: {
      auto* o = static_cast<uint16_t*>(out.raw_data());
      for (int64_t i = 0; i < n; ++i) o[i] = float_to_half(s[i]);
      break;
    }
    case DType::U16: round_clamp(s, n, out.data<uint16_t>(), dtype); break;
    case DType::I16: round_clamp(s, n, out.data<int16_t>(), dtype); break;
    case DType::I32: round_clamp(s, n, out.data<int32_t>(), dtype); break;
    case DType::U8: round_clamp(s, n, out.data<uint8_t>(), dtype); break;
    default: MRMF_THROW(Data, "from_float32: unsupported dtype ", dtype_name(dtype));
  }
  return out;
}

}  // namespace mrmf::data
