#pragma once
// The float64 reference of the layer_norm op: textbook two-pass statistics per row (the mean,
// then the mean of squared deviations), and the backward's analytic gradient. Row-major
// [rows, cols] arrays; the fused add (input + bias + residual) is the caller's.
#include <cstdint>
#include <span>
#include <vector>

namespace flashjit::reference {

struct LayerNormShape {
  std::int64_t rows = 1;
  std::int64_t cols = 1;
  bool rms = false;  ///< RMS norm: no mean subtracted, no β
  double epsilon = 1e-5;
};

struct LayerNormResult {
  std::vector<double> y;     ///< [rows, cols]
  std::vector<double> mean;  ///< [rows]; zeros for RMS norm
  std::vector<double> rstd;  ///< [rows]: 1/√(σ² + ε) (σ² biased), or 1/√(mean(x²) + ε)
};

/// y = (x − μ)·rstd·γ + β per row (β empty for RMS norm, where μ = 0).
LayerNormResult layer_norm(const LayerNormShape& shape, std::span<const double> x,
                           std::span<const double> gamma, std::span<const double> beta);

struct LayerNormGradients {
  std::vector<double> dx;      ///< [rows, cols]
  std::vector<double> dgamma;  ///< [cols]
  std::vector<double> dbeta;   ///< [cols]: Σ_rows dy (unused for RMS norm)
  std::vector<double> dbias;   ///< [cols]: Σ_rows dx, the fused bias's gradient
};

/// The gradients of Σ y·dy with respect to x, γ, β and a bias added to every row, from the
/// analytic formula dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ (RMS norm: no mean(g)).
LayerNormGradients layer_norm_backward(const LayerNormShape& shape, std::span<const double> x,
                                       std::span<const double> gamma, std::span<const double> dy);

}  // namespace flashjit::reference
