// The layer norm's entry in the op registry: its name, its compile matrix and its tuned ops.
#include <algorithm>

#include "common/op_registry.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_emulated.hpp"
#include "layer_norm/layer_norm_space.cuh"

namespace flashjit::kernels {
namespace {

// The layer norm's compile matrix: every config, or the default of every (dtype, norm, row-length
// bucket), each as the forward and the backward row kernel (and on sm_90a their cluster-split
// twins of every cluster size, where the config has them), and the backward's
// parameter-gradient kernel of every dtype.
std::vector<detail::KernelSpec> layer_norm_specs(const std::string& arch, SpecSet set) {
  std::vector<LayerNormConfig> configs;
  if (set == SpecSet::all) {
    configs = layer_norm_configs();
  } else {
    for (const LayerNormConfig& config : layer_norm_configs()) {
      const LayerNormConfig chosen = default_layer_norm_config(
          config.dtype, config.rms,
          config.max_cols != 0 ? config.max_cols : layer_norm_space::kMaxCols);
      if (std::find(configs.begin(), configs.end(), chosen) == configs.end()) {
        configs.push_back(chosen);
      }
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const LayerNormConfig& config : configs) {
    specs.push_back(layer_norm_spec(config, arch));
    specs.push_back(layer_norm_backward_spec(config, arch));
    if (!layer_norm_clusters(config, arch)) continue;
    for (int cluster : layer_norm_space::kClusterSizes) {
      specs.push_back(layer_norm_spec(config, arch, cluster));
      specs.push_back(layer_norm_backward_spec(config, arch, cluster));
    }
  }
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    specs.push_back(layer_norm_param_grad_spec(dtype, arch));
  }
  return specs;
}

}  // namespace

OpInfo layer_norm_op() {
  return {"layer-norm",
          "layer norm and RMS norm, forward and backward (bandwidth kernels: 16-byte vectors, "
          "two-pass statistics on chip, long rows split over a cluster on sm_90a; fused bias "
          "and residual add, deterministic dgamma/dbeta), fp16/bf16/fp32",
          layer_norm_specs,
          {"layer-norm", "layer-norm-backward"},
          emulated::add_layer_norm_kernels};
}

}  // namespace flashjit::kernels
