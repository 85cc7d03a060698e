#pragma once
// Element types of tensors handed to flashjit, and host conversions for the 16-bit ones
// (so callers and tests can prepare fp16/bf16 data without CUDA headers).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flashjit {

/// Element type of a tensor: fp16, bf16 and fp32 for values, i32 for index arrays (sequence
/// offsets and lengths, page tables).
enum class DType { f16, bf16, f32, i32 };

/// Short name used in kernel names and the command line: "fp16", "bf16", "fp32" ("int32").
std::string_view dtype_name(DType dtype);
/// Parses a value dtype's name as printed by dtype_name (also "f16", "half", "bfloat16", "f32",
/// "float"); index arrays are always int32 and have no name to parse.
/// Throws InvalidArgument naming `argument` when the name is unknown.
DType parse_dtype(std::string_view name, std::string_view argument = "dtype");
/// Size of one element in bytes.
std::size_t dtype_size(DType dtype);

/// IEEE binary16 bits of `value`, rounded to nearest even (overflow gives infinity).
std::uint16_t f16_bits_from_float(float value);
/// The float value of IEEE binary16 `bits`.
float float_from_f16_bits(std::uint16_t bits);
/// bfloat16 bits of `value`, rounded to nearest even (NaN stays NaN).
std::uint16_t bf16_bits_from_float(float value);
/// The float value of bfloat16 `bits`.
float float_from_bf16_bits(std::uint16_t bits);

}  // namespace flashjit
