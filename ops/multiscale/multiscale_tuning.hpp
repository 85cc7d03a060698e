#pragma once
// The multi-scale attention ops' tuning description (autotune/tuning_problem.hpp):
// multiscale-forward and multiscale-backward are Runtime::multiscale_forward and
// multiscale_backward, whose configs pick the attention tiles multi-scale attention runs on (the
// mma.sync forward's, or the deterministic backward's dK/dV and dQ tiles). Their names are the
// attention tiles' names, the mask being part of the key.
#include <string>
#include <vector>

#include "attention/attention_tuning.hpp"
#include "autotune/tuning_problem.hpp"
#include "multiscale/multiscale_attention.hpp"

namespace flashjit::autotune {

/// The forward tile's name.
template <>
struct TunedConfigTraits<kernels::MultiScaleForwardConfig> {
  static std::string name(const kernels::MultiScaleForwardConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::MultiScaleForwardConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::MultiScaleForwardConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

/// The backward tiles' name.
template <>
struct TunedConfigTraits<kernels::MultiScaleBackwardConfig> {
  static std::string name(const kernels::MultiScaleBackwardConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::MultiScaleBackwardConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::MultiScaleBackwardConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

}  // namespace flashjit::autotune

namespace flashjit::kernels {

/// One multi-scale attention call shape (multiscale-forward, or multiscale-backward when
/// `backward`): its key is attention's (dtype, head dim, sizes) with the mask ("decay" or
/// "tensor") in the mask's place.
class MultiScaleProblem final : public autotune::TuningProblem {
 public:
  MultiScaleProblem(bool backward, DType dtype, const MultiScaleAttention& attention);

  bool backward = false;
  MultiScaleAttention attention;

  std::string_view op() const override;
  std::string key() const override;
  autotune::ShapeFields shape_fields() const override;
  std::string describe() const override;
  bool empty() const override;
  /// Attention's count; the decay mask is causal (its blocks above the diagonal are skipped).
  double flops() const override;
  autotune::TunedConfig default_config(const std::string& arch) const override;
  /// The forward's mma.sync tiles, or every (dK/dV, dQ) tile pair of the backward (of which
  /// the tuner times each tile beside the default's other, then the fastest pair, as for the
  /// attention backward's deterministic mode).
  std::vector<autotune::TunedConfig> space() const override;
  bool timed(const autotune::TunedConfig& config, const autotune::TunedConfig& fallback,
             const std::string& arch) const override;
  void prune_for_size(std::vector<autotune::Candidate>& candidates) const override;
  std::optional<autotune::TunedConfig> fastest_pair(
      const std::vector<autotune::Candidate>& candidates,
      const std::vector<autotune::CandidateTiming>& timings) const override;
  bool pairs_parts() const override;
  std::unique_ptr<autotune::TuningWorkspace> workspace(
      detail::RuntimeBackend& backend) const override;
};

}  // namespace flashjit::kernels
