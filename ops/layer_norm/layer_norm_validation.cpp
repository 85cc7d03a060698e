// The layer_norm op's argument checks, forward and backward: every bad argument is named
// before anything is launched or written.
#include <cmath>
#include <string>

#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_space.cuh"

namespace flashjit::kernels {
namespace {

/// x-like [rows, cols] with unit column stride (rows may have any stride).
void check_rows(const TensorView& view, const std::string& name, const TensorView& x) {
  check_tensor(view, name, 2);
  check_same_dtype(view, x, name, "x");
  check_shape(view, name, {x.shape[0], x.shape[1]}, "[rows, cols] of x");
  if (view.strides[1] != 1 && view.shape[1] > 1) {
    throw InvalidArgument(name + ".strides",
                          "the column stride must be 1 (rows may have any stride)");
  }
}

/// A contiguous [cols] vector in x's dtype.
void check_columns(const TensorView& view, const std::string& name, const TensorView& x) {
  check_tensor(view, name, 1);
  check_same_dtype(view, x, name, "x");
  check_shape(view, name, {x.shape[1]}, "[cols] of x");
  if (view.strides[0] != 1 && view.shape[0] > 1) {
    throw InvalidArgument(name + ".strides", "must be contiguous (stride 1)");
  }
}

/// An fp32 [rows] statistic.
void check_statistic(const TensorView& view, const std::string& name, const TensorView& x) {
  check_tensor(view, name, 1);
  if (view.dtype != DType::f32) {
    throw InvalidArgument(name + ".dtype",
                          "is " + std::string(dtype_name(view.dtype)) + "; statistics are fp32");
  }
  check_shape(view, name, {x.shape[0]}, "[rows] of x");
}

/// x itself: [rows, cols], fp16/bf16/fp32, cols 1 to kMaxCols, unit column stride.
void check_x(const TensorView& x) {
  check_tensor(x, "x", 2);
  check_value_dtype(x, "x");
  if (x.shape[1] < 1 || x.shape[1] > layer_norm_space::kMaxCols) {
    throw InvalidArgument("x.shape", "cols (dimension [1]) is " + std::to_string(x.shape[1]) +
                                         "; must be from 1 to " +
                                         std::to_string(layer_norm_space::kMaxCols));
  }
  check_rows(x, "x", x);
}

/// beta (or dbeta): required for layer norm, absent for RMS norm.
void check_beta(const LayerNorm& options, const TensorView& beta, const std::string& name,
                const TensorView& x) {
  if (options.rms && present(beta)) {
    throw InvalidArgument(name, "must be absent (null data) for RMS norm, which has no beta");
  }
  if (!options.rms) check_columns(beta, name, x);
}

/// `output` shares no element with any of `inputs`.
void check_apart(const TensorView& output, const std::string& name,
                 std::initializer_list<std::pair<const TensorView*, const char*>> others,
                 Role role) {
  if (!present(output)) return;
  for (const auto& [other, other_name] : others) {
    if (present(*other)) check_disjoint(output, *other, name, other_name, role);
  }
}

}  // namespace

void validate_layer_norm_arguments(const LayerNorm& options, const TensorView& x,
                                   const TensorView& gamma, const TensorView& beta,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd) {
  if (!(options.epsilon > 0.0f) || !std::isfinite(options.epsilon)) {
    throw InvalidArgument("options.epsilon",
                          "is " + std::to_string(options.epsilon) + "; must be finite and > 0");
  }
  check_x(x);
  check_columns(gamma, "gamma", x);
  check_beta(options, beta, "beta", x);
  if (present(options.bias)) check_columns(options.bias, "options.bias", x);
  if (present(options.residual)) check_rows(options.residual, "options.residual", x);
  if (present(options.sum)) check_rows(options.sum, "options.sum", x);
  check_rows(y, "y", x);
  if (options.rms && present(mean)) {
    throw InvalidArgument("mean", "must be absent (null data) for RMS norm, which has no mean");
  }
  if (present(mean)) check_statistic(mean, "mean", x);
  if (present(rstd)) check_statistic(rstd, "rstd", x);
  // Outputs: y may be x itself (each thread reads its columns before it writes them); the
  // rest share nothing with the inputs or each other.
  check_no_self_overlap(y, "y");
  check_no_partial_overlap(y, x, "y", "x");
  const auto inputs = {std::pair{&gamma, "gamma"}, std::pair{&beta, "beta"},
                       std::pair{&options.bias, "options.bias"},
                       std::pair{&options.residual, "options.residual"}};
  check_apart(y, "y", inputs, Role::input);
  for (const auto& [output, name] : {std::pair{&options.sum, "options.sum"},
                                     std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    if (!present(*output)) continue;
    check_no_self_overlap(*output, name);
    check_apart(*output, name, inputs, Role::input);
    check_apart(*output, name, {{&x, "x"}}, Role::input);
    check_apart(*output, name, {{&y, "y"}}, Role::output);
  }
  check_apart(options.sum, "options.sum", {{&mean, "mean"}, {&rstd, "rstd"}}, Role::output);
  check_apart(mean, "mean", {{&rstd, "rstd"}}, Role::output);
}

void validate_layer_norm_backward_arguments(const LayerNorm& options, const TensorView& x,
                                            const TensorView& gamma, const TensorView& mean,
                                            const TensorView& rstd, const TensorView& dy,
                                            const TensorView& dx, const TensorView& dgamma,
                                            const TensorView& dbeta, const TensorView& dbias) {
  for (const auto& [fused, name] :
       {std::pair{&options.bias, "options.bias"}, std::pair{&options.residual, "options.residual"},
        std::pair{&options.sum, "options.sum"}}) {
    if (present(*fused)) {
      throw InvalidArgument(name,
                            "must be absent in the backward: pass the forward's sum as x, "
                            "and dbias for the bias's gradient");
    }
  }
  check_x(x);
  check_columns(gamma, "gamma", x);
  if (options.rms && present(mean)) {
    throw InvalidArgument("mean", "must be absent (null data) for RMS norm, which has no mean");
  }
  if (!options.rms && !present(mean)) {
    throw InvalidArgument("mean", "is absent; the backward needs the mean the forward wrote");
  }
  if (!present(rstd)) {
    throw InvalidArgument("rstd", "is absent; the backward needs the rstd the forward wrote");
  }
  if (present(mean)) check_statistic(mean, "mean", x);
  check_statistic(rstd, "rstd", x);
  check_rows(dy, "dy", x);
  check_rows(dx, "dx", x);
  check_columns(dgamma, "dgamma", x);
  check_beta(options, dbeta, "dbeta", x);
  if (present(dbias)) check_columns(dbias, "dbias", x);
  check_no_self_overlap(dx, "dx");
  const auto inputs = {std::pair{&x, "x"}, std::pair{&gamma, "gamma"}, std::pair{&mean, "mean"},
                       std::pair{&rstd, "rstd"}, std::pair{&dy, "dy"}};
  const auto outputs = {std::pair{&dx, "dx"}, std::pair{&dgamma, "dgamma"},
                        std::pair{&dbeta, "dbeta"}, std::pair{&dbias, "dbias"}};
  for (const auto& [output, name] : outputs) {
    check_apart(*output, name, inputs, Role::input);
    for (const auto& [other, other_name] : outputs) {
      if (other != output) check_apart(*output, name, {{other, other_name}}, Role::output);
    }
  }
}

}  // namespace flashjit::kernels
