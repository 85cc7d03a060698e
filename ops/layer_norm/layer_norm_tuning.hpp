#pragma once
// The layer norm ops' tuning description (autotune/tuning_problem.hpp): layer-norm and
// layer-norm-backward are Runtime::layer_norm and Runtime::layer_norm_backward, whose configs
// pick the row kernel's row-length bucket, threads per row and vector width
// (ops/layer_norm/layer_norm_space.cuh); the call's dtype and norm pick the space, the row
// length prunes it.
#include <string>
#include <vector>

#include "autotune/tuning_problem.hpp"
#include "layer_norm/layer_norm.hpp"

namespace flashjit::autotune {

/// "c4096.t128.v4": the bucket ("cany" for the unbounded one), threads per row, vector width
/// (dtype and norm follow from the key).
template <>
struct TunedConfigTraits<kernels::LayerNormConfig> {
  static std::string name(const kernels::LayerNormConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::LayerNormConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::LayerNormConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

/// The row kernel's name; its kernels are the row kernel and the parameter-gradient kernel.
template <>
struct TunedConfigTraits<kernels::LayerNormBackwardConfig> {
  static std::string name(const kernels::LayerNormBackwardConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::LayerNormBackwardConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::LayerNormBackwardConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

}  // namespace flashjit::autotune

namespace flashjit::kernels {

/// One layer norm call shape (layer-norm, or layer-norm-backward when `backward`): its key is the
/// dtype, the buckets of the columns and rows, and the norm with its fused work ("ln" or "rms",
/// then ".bias" and ".residual" for the forward, ".dbias" for the backward).
class LayerNormProblem final : public autotune::TuningProblem {
 public:
  LayerNormProblem(bool backward, DType dtype, const LayerNormShape& norm);

  bool backward = false;
  LayerNormShape norm;

  std::string_view op() const override;
  std::string key() const override;
  autotune::ShapeFields shape_fields() const override;
  std::string describe() const override;
  bool empty() const override;
  /// The tensors read and written once each (forward: x, residual, bias, gamma, beta; y, sum,
  /// mean, rstd; backward: x, dy, gamma, mean, rstd; dx, dgamma, dbeta, dbias), not the
  /// backward's fp32 partials.
  double bytes() const override;
  autotune::TunedConfig default_config(const std::string& arch) const override;
  /// layer_norm_configs() of the dtype and norm, every bucket.
  std::vector<autotune::TunedConfig> space() const override;
  /// A bucket shorter than the row.
  std::string cannot_run(const autotune::TunedConfig& config) const override;
  /// The bounded buckets larger than the smallest bucket that holds the row: they do the same
  /// work with more register slots a thread leaves idle. The unbounded bucket (the row in
  /// shared memory instead of registers) and the default stay.
  void prune_for_size(std::vector<autotune::Candidate>& candidates) const override;
  std::unique_ptr<autotune::TuningWorkspace> workspace(
      detail::RuntimeBackend& backend) const override;
};

}  // namespace flashjit::kernels
