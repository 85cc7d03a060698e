#include "reference/row_softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace flashjit::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

}  // namespace

double softmax_in_place(double* row, int64_t n) {
  const double row_max = n > 0 ? *std::max_element(row, row + n) : kNegInf;
  if (row_max == kNegInf) {
    std::fill(row, row + n, 0.0);
    return kNegInf;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - row_max);
  for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] - row_max) / sum;
  return row_max + std::log(sum);
}

void softmax_rows(const double* x, int64_t rows, int64_t cols, int64_t row_stride, double* y) {
  if (x == nullptr || y == nullptr) {
    throw std::invalid_argument("flashjit::reference: softmax_rows: null pointer");
  }
  if (rows < 0 || cols < 0 || row_stride < cols) {
    throw std::invalid_argument("flashjit::reference: softmax_rows: bad sizes");
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(x + r * row_stride, x + r * row_stride + cols, y + r * row_stride);
    softmax_in_place(y + r * row_stride, cols);
  }
}

}  // namespace flashjit::reference
