#pragma once
// 16-bit float types and conversions to and from fp32 (the accumulation type). On the device
// they are single PTX instructions; the host twins are the bit-exact IEEE / bfloat16
// round-to-nearest-even conversions, also used by the host library (flashjit::DType helpers).
#include "tile/platform.cuh"

#if !defined(FJ_DEVICE_CODE)
#include <cmath>
#include <cstdint>
#include <cstring>
#endif

namespace flashjit {

/// IEEE binary16 storage.
struct half_t {
  unsigned short bits;
};
/// bfloat16 storage (the upper half of an fp32).
struct bfloat16_t {
  unsigned short bits;
};

#if defined(FJ_DEVICE_CODE)

FJ_DEVICE float to_float(half_t value) {
  float result;
  asm("cvt.f32.f16 %0, %1;" : "=f"(result) : "h"(value.bits));
  return result;
}
FJ_DEVICE float to_float(bfloat16_t value) {
  return __int_as_float(static_cast<int>(value.bits) << 16);
}
FJ_DEVICE half_t to_half(float value) {
  half_t result;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(result.bits) : "f"(value));
  return result;
}
FJ_DEVICE bfloat16_t to_bfloat16(float value) {
  bfloat16_t result;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(result.bits) : "f"(value));
  return result;
}
FJ_DEVICE unsigned float_bits(float value) { return __float_as_uint(value); }
FJ_DEVICE float float_from_bits(unsigned bits) { return __uint_as_float(bits); }

#else  // host twins

inline std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}
inline float float_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline float to_float(half_t value) {
  std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000) << 16;
  std::uint32_t exponent = (value.bits >> 10) & 0x1f;
  std::uint32_t mantissa = value.bits & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  return float_from_bits(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

inline float to_float(bfloat16_t value) {
  return float_from_bits(static_cast<std::uint32_t>(value.bits) << 16);
}

inline half_t to_half(float value) {
  std::uint32_t bits = float_bits(value);
  auto sign = static_cast<unsigned short>((bits >> 16) & 0x8000);
  float magnitude = std::fabs(value);
  if (std::isnan(value)) return {static_cast<unsigned short>(sign | 0x7e00)};
  if (magnitude >= 65520.0f) return {static_cast<unsigned short>(sign | 0x7c00)};  // to inf
  if (magnitude < 6.103515625e-05f) {  // subnormal: units of 2^-24, ties to even
    return {static_cast<unsigned short>(
        sign | static_cast<unsigned short>(std::nearbyint(magnitude * 16777216.0f)))};
  }
  std::uint32_t abs_bits = bits & 0x7fffffffu;
  abs_bits += 0xfff + ((abs_bits >> 13) & 1);  // round to nearest, ties to even
  std::uint32_t exponent = (abs_bits >> 23) - 127 + 15;
  return {static_cast<unsigned short>(sign | (exponent << 10) | ((abs_bits >> 13) & 0x3ff))};
}

inline bfloat16_t to_bfloat16(float value) {
  std::uint32_t bits = float_bits(value);
  if (std::isnan(value)) return {static_cast<unsigned short>((bits >> 16) | 0x40)};  // stay NaN
  std::uint32_t round = 0x7fff + ((bits >> 16) & 1);  // to nearest, ties to even
  return {static_cast<unsigned short>((bits + round) >> 16)};
}

#endif

FJ_HOST_DEVICE float to_float(float value) { return value; }

/// Converts an fp32 value to storage type T (float, half_t or bfloat16_t).
template <typename T>
FJ_HOST_DEVICE T from_float(float value);
template <>
FJ_HOST_DEVICE float from_float<float>(float value) {
  return value;
}
template <>
FJ_HOST_DEVICE half_t from_float<half_t>(float value) {
  return to_half(value);
}
template <>
FJ_HOST_DEVICE bfloat16_t from_float<bfloat16_t>(float value) {
  return to_bfloat16(value);
}

/// The value of fp8 e4m3 `bits` (the low byte; OCP FP8's E4M3: 1 sign, 4 exponent bits of bias
/// 7, 3 mantissa bits). Its exponent and mantissa placed in the low bits
/// of a bfloat16's are that value times 2^-120, subnormals included (both formats' subnormals
/// have the smallest exponent), so one exact multiplication restores it. The pattern e4m3
/// reserves for NaN (S.1111.111) reads as ±480.
FJ_HOST_DEVICE float float_from_e4m3(unsigned bits) {
  const bfloat16_t shifted{static_cast<unsigned short>((bits & 0x80u) << 8 | (bits & 0x7Fu) << 4)};
  return to_float(shifted) * 0x1p120f;
}

/// The fp8 e4m3 code of `value`, rounded to nearest with ties to even, saturating at ±448
/// (e4m3 has no infinity; 0x7F, its NaN, is what NaN becomes). Integer arithmetic on the
/// float's bits, the same on every architecture and on the host: the significand keeps 3
/// bits past its leading one (fewer below 2^-6, e4m3's subnormals in steps of 2^-9).
FJ_HOST_DEVICE unsigned e4m3_from_float(float value) {
  const unsigned bits = float_bits(value);
  const unsigned sign = bits >> 24 & 0x80u;
  const unsigned magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7Fu;
  const int exponent = int(magnitude >> 23) - 127;  // of a normal float
  if (exponent < -10) return sign;                  // below half the smallest subnormal: 0
  const unsigned significand = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = 20 + (exponent < -6 ? -6 - exponent : 0);  // bits dropped, 20 to 24
  unsigned kept = significand >> shift;
  const unsigned rest = significand & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u) != 0)) ++kept;
  // Subnormal: kept counts steps of 2^-9 (8 of them, after rounding up, is 0x08, the smallest
  // normal). Normal: kept is 8 to 16 eighths of 2^exponent (16 carries into the exponent).
  const unsigned code = exponent < -6 ? kept : unsigned(exponent + 7) * 8u + kept - 8u;
  return sign | (code > 0x7Eu ? 0x7Eu : code);
}

/// fp8 e4m3 storage, as an element type of global tensors (an fp8 cache's rows written one
/// element at a time): to_float decodes it, from_float rounds to it.
struct e4m3_t {
  unsigned char bits;
};
FJ_HOST_DEVICE float to_float(e4m3_t value) { return float_from_e4m3(value.bits); }
template <>
FJ_HOST_DEVICE e4m3_t from_float<e4m3_t>(float value) {
  return {static_cast<unsigned char>(e4m3_from_float(value))};
}

/// Two fp8 e4m3 codes in 16 bits, the first in the low byte: the element of the fp8 forward's
/// shared tiles, which the 16-bit tile code (cp.async chunks, ldmatrix, the fragment walks)
/// moves as if it were one 16-bit element. A 16-bit m16n8k16 fragment of them is, byte for
/// byte, an m16n8k32 fragment of e4m3 (tile/mma.cuh).
struct e4m3x2_t {
  unsigned short bits;
};

/// 2^x. On the device the hardware approximation (ex2.approx, ~2 ulp), which is what softmax
/// needs: every exponent in flashjit is a base-2 one with log2(e) folded into the scale.
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float exp2_approx(float x) {
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}
#else
inline float exp2_approx(float x) { return std::exp2(x); }
#endif

/// a·b + c rounded once (FFMA on the device).
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#else
inline float fma_rn(float a, float b, float c) { return std::fma(a, b, c); }
#endif

/// The larger of a and b (the other where one is NaN): one max.f32 on the device, where a
/// compare and a select would take two instructions.
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float max_float(float a, float b) { return fmaxf(a, b); }
#else
inline float max_float(float a, float b) { return std::fmax(a, b); }
#endif

/// log2(x), the hardware approximation on the device.
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float log2_approx(float x) {
  float result;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}
#else
inline float log2_approx(float x) { return std::log2(x); }
#endif

/// tanh(x), the hardware approximation on the device (sm_75+, ~2^-11 relative error).
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float tanh_approx(float x) {
  float result;
  asm("tanh.approx.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}
#else
inline float tanh_approx(float x) { return std::tanh(x); }
#endif

/// √x correctly rounded (sqrt.rn on the device, as std::sqrt on the host: the same bits).
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float sqrt_rn(float x) {
  float result;
  asm("sqrt.rn.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}
#else
inline float sqrt_rn(float x) { return std::sqrt(x); }
#endif

/// ln(2): turns a base-2 log-sum-exp into the natural one the API returns.
constexpr float kLn2 = 0.693147180559945309f;
/// log2(e): turns the API's natural log-sum-exp back into base 2 (backward pass).
constexpr float kLog2e = 1.442695040888963407f;

}  // namespace flashjit
