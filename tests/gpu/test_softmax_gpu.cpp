// GPU tests (label `gpu`): the softmax op against the float64 reference on real hardware.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "flashjit/flashjit.hpp"
#include "reference/checker.hpp"

using namespace flashjit;

namespace {

// Host values rounded to `dtype`, as bytes ready to copy, plus the rounded values in double.
struct HostTensor {
  std::vector<unsigned char> bytes;
  std::vector<double> values;
};

HostTensor make_input(DType dtype, std::int64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  HostTensor tensor;
  tensor.bytes.resize(static_cast<std::size_t>(count) * dtype_size(dtype));
  for (std::int64_t i = 0; i < count; ++i) {
    float value = normal(rng);
    if (dtype == DType::f32) {
      std::memcpy(&tensor.bytes[static_cast<std::size_t>(i) * 4], &value, 4);
    } else {
      std::uint16_t bits = dtype == DType::f16 ? f16_bits_from_float(value)
                                               : bf16_bits_from_float(value);
      value = dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
      std::memcpy(&tensor.bytes[static_cast<std::size_t>(i) * 2], &bits, 2);
    }
    tensor.values.push_back(value);
  }
  return tensor;
}

std::vector<double> to_doubles(DType dtype, const std::vector<unsigned char>& bytes) {
  std::vector<double> values(bytes.size() / dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f32) {
      float value;
      std::memcpy(&value, &bytes[i * 4], 4);
      values[i] = value;
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      values[i] = dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
    }
  }
  return values;
}

}  // namespace

TEST_CASE("softmax on the GPU matches the float64 reference") {
  Runtime runtime;
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    for (std::int64_t cols : {1, 17, 128, 129, 1000, 2048, 5000, 8192, 8193, 70000}) {
      for (std::int64_t row_stride : {cols, cols + 8}) {
        const std::int64_t rows = 257;
        CAPTURE(dtype_name(dtype));
        CAPTURE(cols);
        CAPTURE(row_stride);
        HostTensor x = make_input(dtype, rows * row_stride, static_cast<unsigned>(cols));
        DeviceBuffer x_device = runtime.allocate(x.bytes.size());
        DeviceBuffer y_device = runtime.allocate(x.bytes.size());
        runtime.copy_to_device(x_device.data(), x.bytes.data(), x.bytes.size());
        // Poison y so that unwritten elements fail.
        std::vector<unsigned char> poison(x.bytes.size(), 0xff);
        runtime.copy_to_device(y_device.data(), poison.data(), poison.size());
        const float scale = 0.7f;
        runtime.softmax(
            TensorView::strided(x_device.data(), dtype, {rows, cols}, {row_stride, 1}),
            TensorView::strided(y_device.data(), dtype, {rows, cols}, {row_stride, 1}), scale);
        runtime.synchronize();
        std::vector<unsigned char> y_bytes(x.bytes.size());
        runtime.copy_to_host(y_bytes.data(), y_device.data(), y_bytes.size());

        std::vector<double> scaled = x.values, expected(x.values.size());
        for (double& value : scaled) value *= scale;
        reference::softmax_rows(scaled.data(), rows, cols, row_stride, expected.data());
        std::vector<double> actual = to_doubles(dtype, y_bytes), actual_rows, expected_rows;
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t c = 0; c < cols; ++c) {
            actual_rows.push_back(actual[static_cast<std::size_t>(r * row_stride + c)]);
            expected_rows.push_back(expected[static_cast<std::size_t>(r * row_stride + c)]);
          }
        }
        // Storage rounding dominates: 2^-8 relative for bf16, 2^-11 for fp16.
        const double tolerance = dtype == DType::bf16 ? 8e-3 : dtype == DType::f16 ? 1e-3 : 1e-5;
        auto result = reference::check_close(actual_rows, expected_rows, tolerance, "softmax");
        CHECK_MESSAGE(result.ok, result);
      }
    }
  }
}

TEST_CASE("softmax on the GPU rejects bad arguments before launching") {
  Runtime runtime;
  DeviceBuffer buffer = runtime.allocate(1024);
  TensorView x = TensorView::contiguous(buffer.data(), DType::bf16, {8, 32});
  TensorView y = x;
  y.dtype = DType::f16;
  CHECK_THROWS_AS(runtime.softmax(x, y), InvalidArgument);
  y = x;
  y.data = static_cast<char*>(buffer.data()) + 64;  // overlaps x partly
  CHECK_THROWS_AS(runtime.softmax(x, y), InvalidArgument);
}

TEST_CASE("the runtime reports the device it opened") {
  Runtime runtime;
  CHECK(!runtime.device().name.empty());
  CHECK(runtime.device().sm_count > 0);
  CHECK(runtime.device().arch().rfind("sm_", 0) == 0);
  CHECK_THROWS_AS(Runtime(RuntimeOptions{.device = 1000}), InvalidArgument);
}
