// Every config of the layer_norm space, forward and backward (and their cluster-split twins
// where the config has them), and the backward's parameter-gradient kernel of every dtype,
// host-compiled for the emulator. The configs are
// generated from ops/layer_norm/layer_norm_space.cuh, the same lists
// kernels::layer_norm_configs() walks.
#include "layer_norm/layer_norm_emulated.hpp"

#include <array>

#include "common/emulated_kernel.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_backward_kernel.cuh"
#include "layer_norm/layer_norm_kernel.cuh"

namespace flashjit::kernels::emulated {
namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

constexpr int element_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

constexpr std::size_t valid_config_count() {
  std::size_t count = 0;
  for (DType dtype : kDTypes) {
    for (int max_cols : layer_norm_space::kMaxColsBuckets) {
      for (int threads : layer_norm_space::kThreadsPerRow) {
        for (int width : layer_norm_space::kVectorWidths) {
          count += layer_norm_space::config_valid(max_cols, threads, width, element_bytes(dtype))
                       ? 1
                       : 0;
        }
      }
    }
  }
  return count * 2;  // layer norm and RMS norm
}

constexpr auto kConfigs = [] {
  std::array<LayerNormConfig, valid_config_count()> configs{};
  std::size_t i = 0;
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (int max_cols : layer_norm_space::kMaxColsBuckets) {
        for (int threads : layer_norm_space::kThreadsPerRow) {
          for (int width : layer_norm_space::kVectorWidths) {
            if (layer_norm_space::config_valid(max_cols, threads, width, element_bytes(dtype))) {
              configs[i++] = {dtype, rms, max_cols, threads, width};
            }
          }
        }
      }
    }
  }
  return configs;
}();

/// The forward and backward of config C with each row split over a cluster of `Cluster` blocks.
template <LayerNormConfig C, int Cluster>
void add_cluster_kernels(detail::EmulatedKernelTable& table) {
  using Config = flashjit::LayerNormConfig<Element<C.dtype>, C.max_cols, C.threads_per_row,
                                           C.vector_width, C.rms, Cluster>;
  table.add({layer_norm_spec(C, detail::kEmulatorArch, Cluster),
             &HostLauncher<&layer_norm_cluster_kernel<Config>>::launch});
  table.add({layer_norm_backward_spec(C, detail::kEmulatorArch, Cluster),
             &HostLauncher<&layer_norm_backward_cluster_kernel<Config>>::launch});
}

}  // namespace

void add_layer_norm_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kConfigs>([&]<LayerNormConfig C>() {
    using Config = flashjit::LayerNormConfig<Element<C.dtype>, C.max_cols, C.threads_per_row,
                                             C.vector_width, C.rms>;
    table.add({layer_norm_spec(C, detail::kEmulatorArch),
               &HostLauncher<&layer_norm_kernel<Config>>::launch});
    table.add({layer_norm_backward_spec(C, detail::kEmulatorArch),
               &HostLauncher<&layer_norm_backward_kernel<Config>>::launch});
    if constexpr (layer_norm_space::cluster_valid(C.max_cols, C.threads_per_row, C.vector_width,
                                                  element_bytes(C.dtype), 2)) {
      add_cluster_kernels<C, 2>(table);
      add_cluster_kernels<C, 4>(table);
      add_cluster_kernels<C, 8>(table);
    }
  });
  table.add({layer_norm_param_grad_spec(DType::f16, detail::kEmulatorArch),
             &HostLauncher<&layer_norm_param_grad_kernel<half_t>>::launch});
  table.add({layer_norm_param_grad_spec(DType::bf16, detail::kEmulatorArch),
             &HostLauncher<&layer_norm_param_grad_kernel<bfloat16_t>>::launch});
  table.add({layer_norm_param_grad_spec(DType::f32, detail::kEmulatorArch),
             &HostLauncher<&layer_norm_param_grad_kernel<float>>::launch});
}

}  // namespace flashjit::kernels::emulated
