#pragma once
// Host side of the layer_norm op (layer norm and RMS norm, forward and backward, optionally
// fused with a bias and residual add): configs, specs, argument validation, launch.
#include <string>
#include <vector>

#include "flashjit/dtype.hpp"
#include "flashjit/layer_norm.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// One point of the layer_norm config space (templates/layer_norm/layer_norm_space.cuh); the
/// forward and the backward row kernel share it.
struct LayerNormConfig {
  DType dtype = DType::f32;
  bool rms = false;
  int max_cols = 0;  ///< row-length bucket; 0 handles any length
  int threads_per_row = 128;
  int vector_width = 1;

  bool operator==(const LayerNormConfig&) const = default;
};

/// Every valid config of the space, for every dtype and both norms, in a fixed order.
std::vector<LayerNormConfig> layer_norm_configs();

/// The heuristic config for rows of `cols` columns: the smallest bucket that holds the row,
/// the fewest threads that keep at most 8 values each, and 4-wide vectors where the bucket
/// allows; rows longer than every bucket take the unbounded config with 512 threads.
LayerNormConfig default_layer_norm_config(DType dtype, bool rms, int cols);

/// The forward kernel's spec of `config` for target `arch`.
detail::KernelSpec layer_norm_spec(const LayerNormConfig& config, const std::string& arch);
/// The backward row kernel's spec (dx and the slots' partials).
detail::KernelSpec layer_norm_backward_spec(const LayerNormConfig& config, const std::string& arch);
/// The backward's second kernel (dγ, dβ, dbias from the partials), one per dtype.
detail::KernelSpec layer_norm_param_grad_spec(DType dtype, const std::string& arch);

/// How the backward splits `rows` rows of `cols` into slots (a function of the shape only, so
/// that the sums' order, and their bits, never change).
struct LayerNormSlots {
  int slots = 1;
  std::int64_t rows_per_slot = 1;
};
LayerNormSlots layer_norm_slots(std::int64_t rows, int cols);

/// Checks layer_norm's arguments (see Runtime::layer_norm); throws InvalidArgument naming the
/// first bad one ("x", "gamma.shape", "options.epsilon", ...).
void validate_layer_norm_arguments(const LayerNorm& options, const TensorView& x,
                                   const TensorView& gamma, const TensorView& beta,
                                   const TensorView& y, const TensorView& mean,
                                   const TensorView& rstd);

/// Checks layer_norm_backward's arguments (see Runtime::layer_norm_backward).
void validate_layer_norm_backward_arguments(const LayerNorm& options, const TensorView& x,
                                            const TensorView& gamma, const TensorView& mean,
                                            const TensorView& rstd, const TensorView& dy,
                                            const TensorView& dx, const TensorView& dgamma,
                                            const TensorView& dbeta, const TensorView& dbias);

/// Runtime::layer_norm on `backend`: validates (nothing launched on bad input), then launches
/// the heuristic config for the row length.
void run_layer_norm(detail::RuntimeBackend& backend, const LayerNorm& options, const TensorView& x,
                    const TensorView& gamma, const TensorView& beta, const TensorView& y,
                    const TensorView& mean, const TensorView& rstd, Stream stream);

/// Runtime::layer_norm_backward on `backend`: validates, then launches the row kernel and the
/// parameter-gradient kernel with a workspace allocated in the stream's order.
void run_layer_norm_backward(detail::RuntimeBackend& backend, const LayerNorm& options,
                             const TensorView& x, const TensorView& gamma, const TensorView& mean,
                             const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                             const TensorView& dgamma, const TensorView& dbeta,
                             const TensorView& dbias, Stream stream);

}  // namespace flashjit::kernels
