// Every bad argument to softmax (and to the tensor view helpers) is a named error.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "softmax/softmax.hpp"
#include "support/argument_cases.hpp"

using namespace flashjit;
using flashjit::kernels::validate_softmax_arguments;
using flashjit::testing::check_names;

TEST_CASE("softmax rejects each bad argument by name") {
  alignas(16) static std::uint16_t x_data[64 * 40], y_data[64 * 40];
  const TensorView x = TensorView::contiguous(x_data, DType::bf16, {40, 64});
  const TensorView y = TensorView::contiguous(y_data, DType::bf16, {40, 64});
  CHECK_NOTHROW(validate_softmax_arguments(x, y, 1.0f));
  CHECK_NOTHROW(validate_softmax_arguments(x, x, 0.5f));  // in place

  TensorView bad = y;
  SUBCASE("null pointer") {
    bad.data = nullptr;
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y");
    check_names([&] { validate_softmax_arguments(bad, y, 1.0f); }, "x");
  }
  SUBCASE("dtype mismatch") {
    bad.dtype = DType::f16;
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.dtype");
  }
  SUBCASE("shape mismatch") {
    bad.shape[1] = 32;
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.shape");
  }
  SUBCASE("wrong rank") {
    bad.rank = 3;
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.rank");
  }
  SUBCASE("negative size (0 is an empty call)") {
    bad.shape[0] = -1;
    check_names([&] { validate_softmax_arguments(bad, bad, 1.0f); }, "x.shape");
  }
  SUBCASE("column stride not 1") {
    bad.strides = {128, 2, 0, 0};
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.strides");
  }
  SUBCASE("rows overlapping each other") {
    bad.strides = {32, 1, 0, 0};
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.strides");
  }
  SUBCASE("negative stride") {
    bad.strides = {-64, 1, 0, 0};
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.strides");
  }
  SUBCASE("misaligned pointer") {
    bad.data = reinterpret_cast<char*>(y_data) + 1;
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y");
  }
  SUBCASE("output partly overlapping the input") {
    bad.data = x_data + 64;
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y");
  }
  SUBCASE("extent overflowing 64-bit offsets") {
    bad.strides = {std::int64_t{1} << 62, 1, 0, 0};
    check_names([&] { validate_softmax_arguments(x, bad, 1.0f); }, "y.shape");
  }
  SUBCASE("non-finite scale") {
    check_names([&] { validate_softmax_arguments(x, y, std::numeric_limits<float>::infinity()); },
                "scale");
  }
}

TEST_CASE("tensor view helpers reject bad shapes by name") {
  float data[4];
  check_names([&] { TensorView::strided(data, DType::f32, {2, 2}, {2}); }, "strides");
  check_names([&] { TensorView::contiguous(data, DType::f32, {1, 1, 1, 1, 1}); }, "shape");
  TensorView view = TensorView::strided(data, DType::f32, {2, 2}, {1, 2});
  CHECK(view.numel() == 4);
  CHECK(view.span_bytes() == 16);
}
