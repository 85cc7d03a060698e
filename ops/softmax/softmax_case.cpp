#include "softmax/softmax_case.hpp"

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "reference/row_softmax.hpp"

namespace flashjit::testing {
namespace {

/// `count` normal(0, 3) values in `dtype`: their bytes, and the values they hold.
std::pair<std::vector<unsigned char>, std::vector<double>> random_values(DType dtype,
                                                                         std::size_t count) {
  std::mt19937 rng(static_cast<unsigned>(count));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<unsigned char> bytes(count * dtype_size(dtype));
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    float value = normal(rng);
    if (dtype == DType::f32) {
      std::memcpy(&bytes[i * 4], &value, 4);
    } else {
      const std::uint16_t bits =
          dtype == DType::f16 ? f16_bits_from_float(value) : bf16_bits_from_float(value);
      value = dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
      std::memcpy(&bytes[i * 2], &bits, 2);
    }
    values[i] = value;
  }
  return {std::move(bytes), std::move(values)};
}

double value_at(DType dtype, const std::vector<unsigned char>& bytes, std::size_t i) {
  if (dtype == DType::f32) {
    float value;
    std::memcpy(&value, &bytes[i * 4], 4);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, &bytes[i * 2], 2);
  return dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
}

}  // namespace

std::string SoftmaxCase::name() const {
  return "rows" + std::to_string(rows) + ".cols" + std::to_string(cols) + "." +
         std::string(dtype_name(dtype));
}

SoftmaxVerdict run_softmax_case(Runtime& runtime, const SoftmaxCase& c) {
  const std::int64_t stride = c.cols + 3;
  const auto count = static_cast<std::size_t>(c.rows * stride);
  auto [x_bytes, x_values] = random_values(c.dtype, count);
  DeviceBuffer x = runtime.allocate(x_bytes.size());
  DeviceBuffer y = runtime.allocate(x_bytes.size());
  runtime.copy_to_device(x.data(), x_bytes.data(), x_bytes.size());
  runtime.softmax(TensorView::strided(x.data(), c.dtype, {c.rows, c.cols}, {stride, 1}),
                  TensorView::strided(y.data(), c.dtype, {c.rows, c.cols}, {stride, 1}), c.scale);
  runtime.synchronize();
  std::vector<unsigned char> y_bytes(x_bytes.size());
  runtime.copy_to_host(y_bytes.data(), y.data(), y_bytes.size());

  for (double& value : x_values) value *= c.scale;
  std::vector<double> expected(count), actual_rows, expected_rows;
  reference::softmax_rows(x_values.data(), c.rows, c.cols, stride, expected.data());
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (std::int64_t col = 0; col < c.cols; ++col) {
      const auto i = static_cast<std::size_t>(r * stride + col);
      actual_rows.push_back(value_at(c.dtype, y_bytes, i));
      expected_rows.push_back(expected[i]);
    }
  }
  SoftmaxVerdict verdict;
  verdict.tolerance = c.dtype == DType::bf16 ? 8e-3 : c.dtype == DType::f16 ? 1e-3 : 1e-5;
  verdict.y = reference::check_close(actual_rows, expected_rows, verdict.tolerance, "y");
  verdict.ok = verdict.y.ok;
  return verdict;
}

}  // namespace flashjit::testing
