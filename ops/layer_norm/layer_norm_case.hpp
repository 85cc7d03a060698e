#pragma once
// One layer_norm test case end to end, for any backend: random inputs rounded to the case's
// dtype (plus `offset`, for rows with a large mean), the fused add summed as the kernel sums
// it, the forward (and backward) run on the runtime into poisoned outputs, and the verdict
// against the float64 reference (layer_norm/layer_norm_reference).
#include <cstdint>
#include <string>
#include <vector>

#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "layer_norm/layer_norm_reference.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing {

struct LayerNormCase {
  std::int64_t rows = 4;
  std::int64_t cols = 64;
  DType dtype = DType::f32;
  bool rms = false;
  bool bias = false;      ///< fuse a [cols] bias add
  bool residual = false;  ///< fuse a [rows, cols] residual add
  bool write_sum = true;  ///< write the sum (when fused; the backward needs it)
  bool padded = false;    ///< rows 8 elements apart more than cols, statistics 2 apart
  float epsilon = 1e-5f;
  double offset = 0;  ///< added to every input value (before rounding)
  std::uint64_t seed = 1;

  bool fused() const { return bias || residual; }
  reference::LayerNormShape shape() const { return {rows, cols, rms, epsilon}; }
  /// "r4.c64.fp32.ln.bias.residual.seed1" for test messages.
  std::string name() const;
};

/// The case's host inputs, each value exactly representable in the case's dtype; `x` is the
/// tensor the kernel normalizes (input + bias + residual rounded as the kernel rounds it).
struct LayerNormInputs {
  std::vector<double> input, residual, bias, gamma, beta, dy;  // absent ones empty
  std::vector<double> x;
};
LayerNormInputs layer_norm_inputs(const LayerNormCase& c);

/// What one forward (and backward) run wrote, widened to double; dgamma, dbeta, dbias keep the
/// kernel's exact values, so two runs compare bit for bit.
struct LayerNormOutputs {
  std::vector<double> y, sum, mean, rstd;
  std::vector<double> dx, dgamma, dbeta, dbias;
  bool untouched_padding = true;  ///< no padding of an output (rows, statistics) was written
};

/// Runs the forward on `runtime`, then, with `backward`, the backward with dy and the
/// forward's sum (when fused), mean and rstd.
LayerNormOutputs run_layer_norm(Runtime& runtime, const LayerNormCase& c,
                                const LayerNormInputs& inputs, bool backward);

struct LayerNormVerdict {
  bool ok = false;
  double bound = 0;                            ///< the relative L2 bound of every output
  std::vector<reference::CheckResult> checks;  ///< y, mean, rstd, sum; or dx, dγ, dβ, dbias
  std::string describe() const;
};

/// Runs the forward of `c` and judges y, mean, rstd and the sum against the float64 reference.
/// The bound is 2 units of the dtype's roundoff (y is rounded once: about half a unit of
/// relative L2 error) plus fp32's statistics, 4·2^-24·(1 + √cols); mean is judged relative to
/// the row values' size, not its own.
LayerNormVerdict run_layer_norm_case(Runtime& runtime, const LayerNormCase& c);

/// Runs forward and backward of `c` and judges dx, dγ, dβ and dbias against the float64
/// analytic gradient, with the forward's bound doubled.
LayerNormVerdict run_layer_norm_backward_case(Runtime& runtime, const LayerNormCase& c);

}  // namespace flashjit::testing
