#pragma once
// The options of a layer norm (or RMS norm) call, Runtime::layer_norm and
// Runtime::layer_norm_backward: y = (x − μ)/√(σ² + ε) · γ + β over each row of a [rows, cols]
// tensor, optionally fused with the add before it (x = input + bias + residual).
#include "flashjit/tensor.hpp"

namespace flashjit {

/// How one layer norm call normalizes, and the fused add before it. Tensors are views of the
/// runtime's memory in the call's dtype; a view with null data is absent.
struct LayerNorm {
  /// Added to the variance (the mean square for RMS norm) before the square root; must be
  /// finite and > 0. PyTorch's default.
  float epsilon = 1e-5f;
  /// RMS norm: y = x/√(mean(x²) + ε) · γ, no mean subtracted and no β (beta, dbeta absent,
  /// and no mean statistic).
  bool rms = false;
  /// Forward only: [cols], added to every row of the input before the norm.
  TensorView bias{};
  /// Forward only: [rows, cols], added to the input before the norm.
  TensorView residual{};
  /// Forward only, written: [rows, cols], x = input + bias + residual rounded to the dtype, the
  /// tensor that is normalized; the next block's residual stream, and the backward's x.
  TensorView sum{};
};

}  // namespace flashjit
