// Element types. Compute is float32; F16/BF16 exist for storage (the
// Neuron Inverter float16 frames, future mixed precision) and U16/I16 for the
// raw CosmoFlow counts that the fused downsample kernel converts on the fly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mrmf {

enum class DType : uint8_t { F32, F64, F16, BF16, U16, I16, I32, I64, U8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16:
    case DType::U16:
    case DType::I16: return 2;
    case DType::U8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t);

template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::U16; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::I16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };

}  // namespace mrmf
