#include "autotune/multiscale_candidates.hpp"

#include "kernels/multiscale_attention.hpp"

namespace flashjit::autotune {

using kernels::MultiScaleBackwardConfig;
using kernels::MultiScaleForwardConfig;

bool is_multiscale(TunedOp op) {
  return op == TunedOp::multiscale_forward || op == TunedOp::multiscale_backward;
}

bool is_multiscale_config(const TunedConfig& config) {
  return std::holds_alternative<MultiScaleForwardConfig>(config) ||
         std::holds_alternative<MultiScaleBackwardConfig>(config);
}

TuningProblem multiscale_problem(TunedOp op, const MultiScaleAttention& attention, DType dtype) {
  TuningProblem problem = make_problem(op, dtype, kernels::multiscale_as_attention(attention));
  problem.multiscale_mask = attention.mask;
  problem.attention.deterministic = false;  // the key's field is attention-backward's
  return problem;
}

MultiScaleAttention multiscale_attention(const TuningProblem& problem) {
  const Attention& a = problem.attention;
  return {a.batch,    a.heads_q,  a.heads_kv, a.seqlen_q,
          a.seqlen_k, a.head_dim, 0.0f,       problem.multiscale_mask};
}

std::vector<TunedConfig> multiscale_space(const TuningProblem& problem) {
  const int head_dim = static_cast<int>(problem.attention.head_dim);
  std::vector<TunedConfig> configs;
  if (problem.op == TunedOp::multiscale_forward) {
    for (const kernels::ForwardConfig& tile :
         kernels::multiscale_forward_configs(problem.dtype, head_dim)) {
      configs.emplace_back(MultiScaleForwardConfig{tile, problem.multiscale_mask});
    }
  } else {
    for (const kernels::BackwardConfig& tiles :
         kernels::multiscale_backward_configs(problem.dtype, head_dim)) {
      configs.emplace_back(MultiScaleBackwardConfig{tiles, problem.multiscale_mask});
    }
  }
  return configs;
}

TunedConfig multiscale_default(const TuningProblem& problem, const std::string& arch) {
  const int head_dim = static_cast<int>(problem.attention.head_dim);
  if (problem.op == TunedOp::multiscale_forward) {
    return MultiScaleForwardConfig{
        kernels::default_multiscale_forward_config(problem.dtype, head_dim, arch),
        problem.multiscale_mask};
  }
  return MultiScaleBackwardConfig{
      kernels::default_multiscale_backward_config(problem.dtype, head_dim, arch),
      problem.multiscale_mask};
}

std::vector<detail::KernelSpec> multiscale_specs(const TunedConfig& config,
                                                 const std::string& arch) {
  if (const auto* forward = std::get_if<MultiScaleForwardConfig>(&config)) {
    return {kernels::multiscale_forward_spec(forward->tile, forward->mask, arch)};
  }
  if (const auto* backward = std::get_if<MultiScaleBackwardConfig>(&config)) {
    return kernels::multiscale_backward_specs(backward->tiles, backward->mask, arch);
  }
  return {};
}

TunedConfig attention_tiles(const TunedConfig& config) {
  if (const auto* forward = std::get_if<MultiScaleForwardConfig>(&config)) return forward->tile;
  if (const auto* backward = std::get_if<MultiScaleBackwardConfig>(&config)) {
    return backward->tiles;
  }
  return config;
}

}  // namespace flashjit::autotune
