#pragma once
// attention-decode's tuning description (autotune/tuning_problem.hpp): Runtime::forward with
// Sequences for calls of at most kMaxDecodeQueries query tokens per sequence, whose configs pick
// the tile and the split count.
#include <string>
#include <vector>

#include "attention/attention_tuning.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "autotune/tuning_problem.hpp"

namespace flashjit::autotune {

/// The forward tile's name, then ".splits8": "br64.bc64.w4.s2.splits8" (the layout flags
/// follow from the key).
template <>
struct TunedConfigTraits<kernels::InferenceConfig> {
  static std::string name(const kernels::InferenceConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::InferenceConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::InferenceConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

}  // namespace flashjit::autotune

namespace flashjit::kernels {

/// One decoding call shape (attention-decode): `attention` with seqlen_q the query tokens per
/// sequence and seqlen_k the context, on a cache of `cache`'s layout. Its key adds the cache
/// ("dense", "varlen", "paged16"), the buckets of the batch, the key/value heads and the query
/// heads per key/value head.
class DecodeProblem final : public autotune::TuningProblem {
 public:
  DecodeProblem(DType dtype, const Attention& attention, CacheLayout cache, int sm_count = 0);

  Attention attention;
  CacheLayout cache;
  /// The SMs the default's split count fills (the device's; 0 takes the arch's usual count, as
  /// `flashjit autotune --plan` does without a device).
  int sm_count = 0;

  std::string_view op() const override;
  std::string key() const override;
  autotune::ShapeFields shape_fields() const override;
  std::string describe() const override;
  bool empty() const override;
  double flops() const override;
  /// The keys and values read.
  double bytes() const override;
  autotune::TunedConfig default_config(const std::string& arch) const override;
  std::vector<autotune::TunedConfig> space() const override;
  /// Attention's tiles larger than the shape (Br past the packed rows; each kernel's against
  /// its own smallest), and more splits than key blocks.
  void prune_for_size(std::vector<autotune::Candidate>& candidates) const override;
  std::unique_ptr<autotune::TuningWorkspace> workspace(
      detail::RuntimeBackend& backend) const override;
};

}  // namespace flashjit::kernels
