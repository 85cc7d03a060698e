#include "autotune/layer_norm_candidates.hpp"

#include <string>
#include <utility>
#include <variant>

#include "layer_norm/layer_norm_space.cuh"

namespace flashjit::autotune {
namespace {

using kernels::LayerNormBackwardConfig;
using kernels::LayerNormConfig;

// The smallest bounded bucket of the space that holds rows of `cols`; 0 when none does.
int smallest_bucket(int cols) {
  for (int max_cols : layer_norm_space::kMaxColsBuckets) {
    if (max_cols >= cols) return max_cols;
  }
  return 0;
}

}  // namespace

bool is_layer_norm(TunedOp op) {
  return op == TunedOp::layer_norm || op == TunedOp::layer_norm_backward;
}

bool is_layer_norm_config(const TunedConfig& config) {
  return std::holds_alternative<LayerNormConfig>(config) ||
         std::holds_alternative<LayerNormBackwardConfig>(config);
}

std::string layer_norm_config_name(const LayerNormConfig& config) {
  const std::string bucket = config.max_cols > 0 ? std::to_string(config.max_cols) : "any";
  return "c" + bucket + ".t" + std::to_string(config.threads_per_row) + ".v" +
         std::to_string(config.vector_width);
}

std::vector<TunedConfig> layer_norm_space(const TuningProblem& problem) {
  std::vector<TunedConfig> configs;
  for (const LayerNormConfig& config : kernels::layer_norm_configs()) {
    if (config.dtype != problem.dtype || config.rms != problem.norm.rms) continue;
    if (problem.op == TunedOp::layer_norm_backward) {
      configs.emplace_back(LayerNormBackwardConfig{config});
    } else {
      configs.emplace_back(config);
    }
  }
  return configs;
}

TunedConfig layer_norm_default(const TuningProblem& problem) {
  const LayerNormConfig config =
      kernels::default_layer_norm_config(problem.dtype, problem.norm.rms, problem.norm.cols);
  if (problem.op == TunedOp::layer_norm_backward) return LayerNormBackwardConfig{config};
  return config;
}

const LayerNormConfig& row_config(const TunedConfig& config) {
  if (const auto* backward = std::get_if<LayerNormBackwardConfig>(&config)) return backward->row;
  return std::get<LayerNormConfig>(config);
}

void fill_layer_norm_key(const TuningProblem& problem, TuningKey& key) {
  const kernels::LayerNormShape& n = problem.norm;
  const bool backward = problem.op == TunedOp::layer_norm_backward;
  key.norm = n.rms ? "rms" : "ln";
  if (n.bias) key.norm += backward ? ".dbias" : ".bias";
  if (n.residual && !backward) key.norm += ".residual";
  key.rows = n.rows;
  key.cols = n.cols;
}

double layer_norm_bytes(const TuningProblem& problem) {
  const kernels::LayerNormShape& n = problem.norm;
  const double element = static_cast<double>(dtype_size(problem.dtype));
  const double row = static_cast<double>(n.rows) * n.cols * element;  // one [rows, cols] tensor
  const double column = n.cols * element;                             // one [cols] vector
  const double statistics = static_cast<double>(n.rows) * 4.0 * (n.rms ? 1 : 2);  // rstd, mean
  const double betas = n.rms ? 0 : column;
  if (problem.op == TunedOp::layer_norm_backward) {
    // x, dy, dx; gamma, dgamma, dbeta, dbias; mean and rstd.
    return 3 * row + 2 * column + betas + (n.bias ? column : 0) + statistics;
  }
  // x, y, then residual and sum; gamma, beta, bias; mean and rstd.
  const bool fused = n.bias || n.residual;
  return 2 * row + (n.residual ? row : 0) + (fused ? row : 0) + column + betas +
         (n.bias ? column : 0) + statistics;
}

void prune_layer_norm_buckets(std::vector<Candidate>& candidates, const TuningProblem& problem) {
  const int cols = problem.norm.cols;
  const int holding = smallest_bucket(cols);
  if (holding == 0) return;  // only the unbounded bucket holds the row
  for (Candidate& c : candidates) {
    if (!c.pruned.empty() || c.is_default) continue;
    const int bucket = row_config(c.config).max_cols;
    if (bucket > holding) {
      // Built piece by piece into a new string: GCC 12 warns -Wrestrict (a false positive, GCC
      // bug 105329) at -O2 and above on "literal" + std::to_string(...), and on assigning a
      // literal to the existing string, as emulator/launch.cpp notes.
      std::string why = "c";
      why += std::to_string(bucket);
      why += " > c";
      why += std::to_string(holding);
      why += ", the smallest bucket that holds ";
      why += std::to_string(cols);
      why += " columns (the same work, more idle registers)";
      c.pruned = std::move(why);
    }
  }
}

}  // namespace flashjit::autotune
