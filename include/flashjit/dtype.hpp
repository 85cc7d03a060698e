#pragma once
// Element types of tensors handed to flashjit, and host conversions for the 16-bit ones
// (so callers and tests can prepare fp16/bf16 data without CUDA headers).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flashjit {

/// Element type of a tensor: fp16, bf16 and fp32 for values, i32 for index arrays (sequence
/// offsets and lengths, page tables), e4m3 for an fp8 KV cache (Sequences::k_descale) and the
/// fp8 forward's q, k and v (Attention::q_descale).
enum class DType { f16, bf16, f32, i32, e4m3 };

/// Short name used in kernel names and the command line: "fp16", "bf16", "fp32" ("int32",
/// "e4m3").
std::string_view dtype_name(DType dtype);
/// Parses a value dtype's name as printed by dtype_name (also "f16", "half", "bfloat16", "f32",
/// "float", "float8_e4m3fn"); index arrays are always int32 and have no name to parse.
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
/// fp8 e4m3 bits (OCP FP8 E4M3: bias 7, no infinity, largest finite 448) of `value`, rounded
/// to nearest even; magnitudes past 448 saturate to ±448 and NaN gives 0x7F.
std::uint8_t e4m3_bits_from_float(float value);
/// The float value of e4m3 `bits` (exact; the NaN patterns 0x7F and 0xFF read as ±480, as the
/// kernels read them).
float float_from_e4m3_bits(std::uint8_t bits);

}  // namespace flashjit
