#pragma once
// Host side of the layer_norm op (layer norm and RMS norm, forward and backward, optionally
// fused with a bias and residual add): configs, specs, argument validation, launch.
#include <cstdint>
#include <string>
#include <vector>

#include "flashjit/dtype.hpp"
#include "flashjit/layer_norm.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {
class ConfigChoice;
}  // namespace flashjit::autotune

namespace flashjit::kernels {

/// One point of the layer_norm config space (ops/layer_norm/layer_norm_space.cuh); the
/// forward and the backward row kernel share it.
struct LayerNormConfig {
  DType dtype = DType::f32;
  bool rms = false;
  int max_cols = 0;  ///< row-length bucket; 0 handles any length
  int threads_per_row = 128;
  int vector_width = 1;

  /// Dynamic shared memory per block of the row kernels' cross-warp merge (the unbounded
  /// config adds its stash at launch, the backward the partials of a block's rows).
  int shared_bytes() const;
  bool operator==(const LayerNormConfig&) const = default;
};

/// The backward's config: its row kernel's (dx and the blocks' partials), chosen apart from the
/// forward's since the row kernel does other work; the parameter-gradient kernel is one per
/// dtype.
struct LayerNormBackwardConfig {
  LayerNormConfig row;

  int shared_bytes() const { return row.shared_bytes(); }  ///< the row kernel's
  bool operator==(const LayerNormBackwardConfig&) const = default;
};

/// What a layer norm call's config depends on: the shape of x and the work fused into the
/// call (the autotuner keys its choices by it).
struct LayerNormShape {
  std::int64_t rows = 0;
  int cols = 0;
  bool rms = false;
  bool bias = false;      ///< forward: a bias is added; backward: dbias is written
  bool residual = false;  ///< forward: a residual is added (always false for the backward)

  bool operator==(const LayerNormShape&) const = default;
};

/// The shape of a call on `x`: bias when `options` adds one (forward) or `dbias` is written
/// (backward, whose options carry no bias), residual when `options` adds one.
LayerNormShape layer_norm_shape(const LayerNorm& options, const TensorView& x,
                                const TensorView& dbias = {});

using autotune::ConfigChoice;  // autotune/tuning_problem.hpp

/// Every valid config of the space, for every dtype and both norms, in a fixed order.
std::vector<LayerNormConfig> layer_norm_configs();

/// Whether `config` can normalize rows of `cols` columns: its bucket holds them (max_cols 0
/// holds any row the op accepts).
bool layer_norm_covers(const LayerNormConfig& config, int cols);

/// The heuristic config for rows of `cols` columns: the smallest bucket up to 4096 columns that
/// holds the row, the fewest threads that keep at most 8 values each, and 16-byte vectors where
/// `cols` is a multiple of theirs; longer rows take the unbounded config with 1024 threads. A
/// call whose tensors are not 16-byte aligned runs the config with single elements.
LayerNormConfig default_layer_norm_config(DType dtype, bool rms, int cols);

/// The forward kernel's spec of `config` for target `arch`, each row split over a cluster of
/// `cluster` blocks when more than 1 (layer_norm_space::cluster_valid; sm_90a).
detail::KernelSpec layer_norm_spec(const LayerNormConfig& config, const std::string& arch,
                                   int cluster = 1);
/// The backward row kernel's spec (dx and the block groups' partials), likewise.
detail::KernelSpec layer_norm_backward_spec(const LayerNormConfig& config, const std::string& arch,
                                            int cluster = 1);
/// Whether `config` has cluster-split kernels (the unbounded bucket's 16-byte config at
/// layer_norm_space::kClusterThreads threads) and `arch` runs them (sm_90a).
bool layer_norm_clusters(const LayerNormConfig& config, const std::string& arch);
/// The backward's second kernel (dγ, dβ, dbias from the partials), one per dtype.
detail::KernelSpec layer_norm_param_grad_spec(DType dtype, const std::string& arch);

/// The widest vector calls of `dtype` may use, in elements: 16 bytes' worth.
int widest_vector(DType dtype);

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
/// the config `choice` gives for the call's shape (the heuristic one under policy off).
void run_layer_norm(detail::RuntimeBackend& backend, ConfigChoice& choice, const LayerNorm& options,
                    const TensorView& x, const TensorView& gamma, const TensorView& beta,
                    const TensorView& y, const TensorView& mean, const TensorView& rstd,
                    Stream stream);

/// Runtime::layer_norm_backward on `backend`: validates, then launches the row kernel of the
/// config `choice` gives and the parameter-gradient kernel, with a workspace allocated in the
/// stream's order.
void run_layer_norm_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                             const LayerNorm& options, const TensorView& x, const TensorView& gamma,
                             const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                             const TensorView& dx, const TensorView& dgamma,
                             const TensorView& dbeta, const TensorView& dbias, Stream stream);

/// The forward with an explicit config (the autotuner's candidates), validated like
/// run_layer_norm; throws InvalidArgument("config") when `config` is of another dtype or norm,
/// or its bucket does not hold the row.
void layer_norm(detail::RuntimeBackend& backend, const LayerNorm& options, const TensorView& x,
                const TensorView& gamma, const TensorView& beta, const TensorView& y,
                const TensorView& mean, const TensorView& rstd, const LayerNormConfig& config,
                Stream stream);

/// The backward with an explicit config, as layer_norm.
void layer_norm_backward(detail::RuntimeBackend& backend, const LayerNorm& options,
                         const TensorView& x, const TensorView& gamma, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                         const TensorView& dgamma, const TensorView& dbeta, const TensorView& dbias,
                         const LayerNormBackwardConfig& config, Stream stream);

}  // namespace flashjit::kernels
