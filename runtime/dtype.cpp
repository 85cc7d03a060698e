#include "flashjit/dtype.hpp"

#include <string>

#include "flashjit/error.hpp"
#include "tile/numeric.cuh"

namespace flashjit {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f32: return "fp32";
    case DType::i32: return "int32";
  }
  return "?";
}

DType parse_dtype(std::string_view name, std::string_view argument) {
  if (name == "fp16" || name == "f16" || name == "half") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "fp32" || name == "f32" || name == "float") return DType::f32;
  throw InvalidArgument(std::string(argument),
                        "unknown dtype '" + std::string(name) + "'; accepted: fp16, bf16, fp32");
}

std::size_t dtype_size(DType dtype) {
  return dtype == DType::f32 || dtype == DType::i32 ? 4 : 2;
}

// The conversions live once, in the templates' host twins (tile/numeric.cuh).
std::uint16_t f16_bits_from_float(float value) { return to_half(value).bits; }
float float_from_f16_bits(std::uint16_t bits) { return to_float(half_t{bits}); }
std::uint16_t bf16_bits_from_float(float value) { return to_bfloat16(value).bits; }
float float_from_bf16_bits(std::uint16_t bits) { return to_float(bfloat16_t{bits}); }

}  // namespace flashjit
