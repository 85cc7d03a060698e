// Every config of the softmax space, host-compiled for the emulator. The configs are generated
// from ops/softmax/softmax_space.cuh, the same lists kernels::softmax_configs() walks.
#include "softmax/softmax_emulated.hpp"

#include <array>

#include "common/emulated_kernel.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_kernel.cuh"

namespace flashjit::kernels::emulated {
namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

constexpr std::size_t valid_config_count() {
  std::size_t count = 0;
  for (int max_cols : softmax_space::kMaxColsBuckets) {
    for (int threads : softmax_space::kThreadsPerRow) {
      count += softmax_space::config_valid(max_cols, threads) ? 1 : 0;
    }
  }
  return count * std::size(kDTypes);
}

constexpr auto kConfigs = [] {
  std::array<SoftmaxConfig, valid_config_count()> configs{};
  std::size_t i = 0;
  for (DType dtype : kDTypes) {
    for (int max_cols : softmax_space::kMaxColsBuckets) {
      for (int threads : softmax_space::kThreadsPerRow) {
        if (softmax_space::config_valid(max_cols, threads)) {
          configs[i++] = {dtype, max_cols, threads};
        }
      }
    }
  }
  return configs;
}();

}  // namespace

void add_softmax_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kConfigs>([&]<SoftmaxConfig C>() {
    using Config = flashjit::SoftmaxConfig<Element<C.dtype>, C.max_cols, C.threads_per_row>;
    table.add(
        {softmax_spec(C, detail::kEmulatorArch), &HostLauncher<&softmax_kernel<Config>>::launch});
  });
}

}  // namespace flashjit::kernels::emulated
