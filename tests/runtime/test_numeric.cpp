// Host conversions to and from the 16-bit float types (round to nearest even).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "flashjit/dtype.hpp"
#include "flashjit/error.hpp"

using namespace flashjit;

TEST_CASE("fp16 conversions are exact where representable and round to nearest even") {
  for (float value : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f}) {
    CHECK(float_from_f16_bits(f16_bits_from_float(value)) == value);
  }
  CHECK(f16_bits_from_float(1.0f) == 0x3c00);
  CHECK(f16_bits_from_float(-2.0f) == 0xc000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  CHECK(f16_bits_from_float(1.0f + 0x1p-11f) == 0x3c00);
  CHECK(f16_bits_from_float(1.0f + 3 * 0x1p-11f) == 0x3c02);
  CHECK(f16_bits_from_float(70000.0f) == 0x7c00);  // overflow to +inf
  CHECK(f16_bits_from_float(1e-9f) == 0);           // underflow to +0
  CHECK(std::isnan(float_from_f16_bits(f16_bits_from_float(std::nanf("")))));
  CHECK(std::isinf(float_from_f16_bits(0xfc00)));
}

TEST_CASE("bf16 conversions keep fp32's range and round to nearest even") {
  CHECK(bf16_bits_from_float(1.0f) == 0x3f80);
  CHECK(float_from_bf16_bits(0x3f80) == 1.0f);
  CHECK(bf16_bits_from_float(1.0f + 0x1p-8f) == 0x3f80);      // tie: to even
  CHECK(bf16_bits_from_float(1.0f + 3 * 0x1p-8f) == 0x3f82);  // tie: to even (up)
  CHECK(float_from_bf16_bits(bf16_bits_from_float(1e30f)) == doctest::Approx(1e30f).epsilon(0.01));
  CHECK(std::isnan(float_from_bf16_bits(bf16_bits_from_float(std::nanf("")))));
}

TEST_CASE("dtype names parse and bad names are named errors") {
  CHECK(parse_dtype("bf16") == DType::bf16);
  CHECK(parse_dtype("half") == DType::f16);
  CHECK(dtype_name(DType::f32) == "fp32");
  CHECK(dtype_size(DType::bf16) == 2);
  try {
    parse_dtype("int8", "--dtype");
    FAIL("int8 parsed");
  } catch (const InvalidArgument& error) {
    CHECK(error.argument() == "--dtype");
  }
}
