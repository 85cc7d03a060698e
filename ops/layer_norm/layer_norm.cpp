#include "layer_norm/layer_norm.hpp"

#include <algorithm>

#include "layer_norm/layer_norm_space.cuh"

namespace flashjit::kernels {
namespace space = flashjit::layer_norm_space;

namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

std::string element_type(DType dtype) {
  static const char* kElementTypes[] = {"flashjit::half_t", "flashjit::bfloat16_t", "float"};
  return kElementTypes[static_cast<int>(dtype)];
}

/// The spec both row kernels share but for the entry point and role.
detail::KernelSpec row_kernel_spec(const LayerNormConfig& config, const std::string& arch,
                                   const std::string& entry, const std::string& role, int cluster) {
  detail::KernelSpec spec;
  spec.op = "layer-norm";
  spec.header = "layer_norm/layer_norm_backward_kernel.cuh";
  if (role == "layer_norm") spec.header = "layer_norm/layer_norm_kernel.cuh";
  spec.name_expression =
      "flashjit::" + entry + (cluster > 1 ? "_cluster_kernel" : "_kernel") +
      "<flashjit::LayerNormConfig<" + element_type(config.dtype) + ", " +
      std::to_string(config.max_cols) + ", " + std::to_string(config.threads_per_row) + ", " +
      std::to_string(config.vector_width) + ", " + (config.rms ? "true" : "false") +
      (cluster > 1 ? ", " + std::to_string(cluster) : "") + ">>";
  spec.arch = arch;
  spec.role = role;
  spec.traits = {std::string(dtype_name(config.dtype)), config.rms ? "rms" : "ln",
                 config.max_cols ? detail::trait("cols", config.max_cols) : "colsany",
                 detail::trait("t", config.threads_per_row),
                 detail::trait("v", config.vector_width)};
  if (cluster > 1) spec.traits.push_back(detail::trait("x", cluster));
  spec.readable_name = detail::name_of(role, 0, spec.traits);
  spec.threads = config.threads_per_row * space::rows_per_block(config.threads_per_row);
  spec.dynamic_shared_bytes = config.shared_bytes() + space::exchange_bytes(cluster);
  if (role == "layer_norm_backward") {
    spec.dynamic_shared_bytes = space::merge_bytes(config.threads_per_row) +
                                space::exchange_bytes(cluster) +
                                space::partials_bytes(config.max_cols, config.threads_per_row);
  }
  return spec;
}

}  // namespace

std::vector<LayerNormConfig> layer_norm_configs() {
  std::vector<LayerNormConfig> configs;
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (int max_cols : space::kMaxColsBuckets) {
        for (int threads : space::kThreadsPerRow) {
          for (int width : space::kVectorWidths) {
            if (space::config_valid(max_cols, threads, width,
                                    static_cast<int>(dtype_size(dtype)))) {
              configs.push_back({dtype, rms, max_cols, threads, width});
            }
          }
        }
      }
    }
  }
  return configs;
}

int LayerNormConfig::shared_bytes() const {
  return space::merge_bytes(threads_per_row) + space::params_bytes(max_cols, threads_per_row);
}

LayerNormShape layer_norm_shape(const LayerNorm& options, const TensorView& x,
                                const TensorView& dbias) {
  return {x.shape[0], static_cast<int>(x.shape[1]), options.rms,
          options.bias.data != nullptr || dbias.data != nullptr, options.residual.data != nullptr};
}

bool layer_norm_covers(const LayerNormConfig& config, int cols) {
  return config.max_cols == 0 || cols <= config.max_cols;
}

int widest_vector(DType dtype) { return space::kVectorBytes / static_cast<int>(dtype_size(dtype)); }

LayerNormConfig default_layer_norm_config(DType dtype, bool rms, int cols) {
  // 8 cached values a thread keep 16-byte loads in flight without the register pressure of 16
  // (the backward holds x, dy, γ and three partials per value); the unbounded bucket takes the
  // most threads, as its rows are the longest.
  constexpr int kPreferredValuesPerThread = 8;
  // Longer rows take the unbounded config: its shared-memory stash moves the same bytes, where
  // the 8192 bucket's backward spills (48 values a thread at 1024 threads' 64 registers).
  constexpr int kLongestDefaultBucket = 4096;
  const int width = cols % widest_vector(dtype) == 0 ? widest_vector(dtype) : 1;
  int bucket = 0;
  for (int max_cols : space::kMaxColsBuckets) {
    if (max_cols > kLongestDefaultBucket) break;
    if (max_cols >= cols) {
      bucket = max_cols;
      break;
    }
  }
  const int element = static_cast<int>(dtype_size(dtype));
  LayerNormConfig choice{dtype, rms, bucket, 0, width};
  for (int threads : space::kThreadsPerRow) {
    if (!space::config_valid(bucket, threads, width, element)) continue;
    choice.threads_per_row = threads;  // ends at the most threads if none is small enough
    if (bucket != 0 && bucket / threads <= kPreferredValuesPerThread) break;
  }
  return choice;
}

detail::KernelSpec layer_norm_spec(const LayerNormConfig& config, const std::string& arch,
                                   int cluster) {
  return row_kernel_spec(config, arch, "layer_norm", "layer_norm", cluster);
}

detail::KernelSpec layer_norm_backward_spec(const LayerNormConfig& config, const std::string& arch,
                                            int cluster) {
  return row_kernel_spec(config, arch, "layer_norm_backward", "layer_norm_backward", cluster);
}

bool layer_norm_clusters(const LayerNormConfig& config, const std::string& arch) {
  return arch == "sm_90a" &&
         space::cluster_valid(config.max_cols, config.threads_per_row, config.vector_width,
                              static_cast<int>(dtype_size(config.dtype)), space::kClusterSizes[0]);
}

detail::KernelSpec layer_norm_param_grad_spec(DType dtype, const std::string& arch) {
  detail::KernelSpec spec;
  spec.op = "layer-norm";
  spec.header = "layer_norm/layer_norm_backward_kernel.cuh";
  spec.name_expression = "flashjit::layer_norm_param_grad_kernel<" + element_type(dtype) + ">";
  spec.arch = arch;
  spec.role = "layer_norm_param_grad";
  spec.traits = {std::string(dtype_name(dtype))};
  spec.readable_name = detail::name_of(spec.role, 0, spec.traits);
  spec.threads = space::kParamGradThreads;
  return spec;
}

}  // namespace flashjit::kernels
