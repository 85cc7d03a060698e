#include "flashjit/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "flashjit/error.hpp"
#include "tile/numeric.cuh"

namespace flashjit {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "fp16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "fp32";
    case DType::i32:
      return "int32";
    case DType::e4m3:
      return "e4m3";
  }
  return "?";
}

DType parse_dtype(std::string_view name, std::string_view argument) {
  if (name == "fp16" || name == "f16" || name == "half") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "fp32" || name == "f32" || name == "float") return DType::f32;
  if (name == "e4m3" || name == "float8_e4m3fn") return DType::e4m3;
  throw InvalidArgument(std::string(argument), "unknown dtype '" + std::string(name) +
                                                   "'; accepted: fp16, bf16, fp32, e4m3");
}

std::size_t dtype_size(DType dtype) {
  if (dtype == DType::e4m3) return 1;
  return dtype == DType::f32 || dtype == DType::i32 ? 4 : 2;
}

// The conversions live once, in the templates' host twins (tile/numeric.cuh).
std::uint16_t f16_bits_from_float(float value) { return to_half(value).bits; }
float float_from_f16_bits(std::uint16_t bits) { return to_float(half_t{bits}); }
std::uint16_t bf16_bits_from_float(float value) { return to_bfloat16(value).bits; }
float float_from_bf16_bits(std::uint16_t bits) { return to_float(bfloat16_t{bits}); }

std::uint8_t e4m3_bits_from_float(float value) {
  if (std::isnan(value)) return 0x7F;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isinf(value)) return static_cast<std::uint8_t>(sign | 0x7E);  // saturates at 448
  const double magnitude = std::fabs(static_cast<double>(value));
  constexpr double kMinNormal = 0x1p-6;
  std::uint8_t code = 0;
  if (magnitude < kMinNormal) {
    // Subnormals are multiples of 2^-9; 8 of them is the smallest normal, code 0x08.
    code = static_cast<std::uint8_t>(std::nearbyint(magnitude * 512.0));
  } else {
    int exponent = 0;
    const double fraction = std::frexp(magnitude, &exponent);  // [0.5, 1)
    --exponent;                                                // magnitude in [2^e, 2^(e+1))
    const double mantissa = std::nearbyint((fraction * 2.0 - 1.0) * 8.0);  // ties to even
    const int biased = exponent + 7;
    const int bits = biased > 15 ? 0x7F : (biased << 3) + static_cast<int>(mantissa);
    code = static_cast<std::uint8_t>(std::min(bits, 0x7E));  // 0x7F is NaN: saturate at 448
  }
  return static_cast<std::uint8_t>(sign | code);
}

float float_from_e4m3_bits(std::uint8_t bits) { return float_from_e4m3(bits); }

}  // namespace flashjit
