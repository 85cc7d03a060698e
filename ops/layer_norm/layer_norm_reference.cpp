#include "layer_norm/layer_norm_reference.hpp"

#include <cmath>

namespace flashjit::reference {
namespace {

struct RowStatistics {
  double mean;  // 0 for RMS norm
  double rstd;
};

RowStatistics row_statistics(const LayerNormShape& shape, const double* row) {
  const auto n = static_cast<double>(shape.cols);
  double mean = 0;
  if (!shape.rms) {
    for (std::int64_t j = 0; j < shape.cols; ++j) mean += row[j];
    mean /= n;
  }
  double squares = 0;  // Σ (x − μ)², μ = 0 for RMS norm
  for (std::int64_t j = 0; j < shape.cols; ++j) squares += (row[j] - mean) * (row[j] - mean);
  return {mean, 1.0 / std::sqrt(squares / n + shape.epsilon)};
}

}  // namespace

LayerNormResult layer_norm(const LayerNormShape& shape, std::span<const double> x,
                           std::span<const double> gamma, std::span<const double> beta) {
  LayerNormResult result{std::vector<double>(x.size()),
                         std::vector<double>(static_cast<std::size_t>(shape.rows)),
                         std::vector<double>(static_cast<std::size_t>(shape.rows))};
  for (std::int64_t i = 0; i < shape.rows; ++i) {
    const double* row = &x[static_cast<std::size_t>(i * shape.cols)];
    const RowStatistics stats = row_statistics(shape, row);
    result.mean[static_cast<std::size_t>(i)] = stats.mean;
    result.rstd[static_cast<std::size_t>(i)] = stats.rstd;
    for (std::int64_t j = 0; j < shape.cols; ++j) {
      const auto col = static_cast<std::size_t>(j);
      const double b = beta.empty() ? 0.0 : beta[col];
      result.y[static_cast<std::size_t>(i * shape.cols + j)] =
          (row[j] - stats.mean) * stats.rstd * gamma[col] + b;
    }
  }
  return result;
}

LayerNormGradients layer_norm_backward(const LayerNormShape& shape, std::span<const double> x,
                                       std::span<const double> gamma, std::span<const double> dy) {
  const auto cols = static_cast<std::size_t>(shape.cols);
  LayerNormGradients grads{std::vector<double>(x.size()), std::vector<double>(cols),
                           std::vector<double>(cols), std::vector<double>(cols)};
  const auto n = static_cast<double>(shape.cols);
  std::vector<double> x_hat(cols), g(cols);
  for (std::int64_t i = 0; i < shape.rows; ++i) {
    const std::size_t first = static_cast<std::size_t>(i) * cols;
    const RowStatistics stats = row_statistics(shape, &x[first]);
    double g_mean = 0, g_xhat_mean = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      x_hat[j] = (x[first + j] - stats.mean) * stats.rstd;
      g[j] = dy[first + j] * gamma[j];
      g_mean += g[j] / n;
      g_xhat_mean += g[j] * x_hat[j] / n;
      grads.dgamma[j] += dy[first + j] * x_hat[j];
      grads.dbeta[j] += dy[first + j];
    }
    if (shape.rms) g_mean = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      const double dx = stats.rstd * (g[j] - g_mean - x_hat[j] * g_xhat_mean);
      grads.dx[first + j] = dx;
      grads.dbias[j] += dx;
    }
  }
  return grads;
}

}  // namespace flashjit::reference
