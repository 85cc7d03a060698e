// Every config of the merge_states space, both forms, host-compiled for the emulator. The
// configs are generated from ops/merge_states/merge_states_space.cuh with the rule
// kernels::merge_states_configs() applies, and the two lists are compared by a test.
#include "merge_states/merge_states_emulated.hpp"

#include <array>

#include "common/emulated_kernel.hpp"
#include "merge_states/merge_states.hpp"
#include "merge_states/merge_states_kernel.cuh"

namespace flashjit::kernels::emulated {
namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

// merge_dtypes_supported(), in a form usable in a constant expression.
constexpr bool dtypes_listed(DType input, DType output, bool in_place) {
  return in_place ? output == input
                  : output == input || input == DType::f32 || output == DType::f32;
}

constexpr std::size_t valid_config_count() {
  std::size_t count = 0;
  for (bool in_place : {false, true}) {
    for (DType input : kDTypes) {
      for (DType output : kDTypes) {
        if (!dtypes_listed(input, output, in_place)) continue;
        for (int threads : merge_states_space::kThreadsPerRow) {
          for (int columns : merge_states_space::kColumnsPerThread) {
            count += merge_states_space::config_valid(threads, columns) ? 1 : 0;
          }
        }
      }
    }
  }
  return count;
}

constexpr auto kConfigs = [] {
  std::array<MergeStatesConfig, valid_config_count()> configs{};
  std::size_t i = 0;
  for (bool in_place : {false, true}) {
    for (DType input : kDTypes) {
      for (DType output : kDTypes) {
        if (!dtypes_listed(input, output, in_place)) continue;
        for (int threads : merge_states_space::kThreadsPerRow) {
          for (int columns : merge_states_space::kColumnsPerThread) {
            if (merge_states_space::config_valid(threads, columns)) {
              configs[i++] = {input, output, threads, columns, in_place};
            }
          }
        }
      }
    }
  }
  return configs;
}();

}  // namespace

void add_merge_states_kernels(detail::EmulatedKernelTable& table) {
  for_each_config<kConfigs>([&]<MergeStatesConfig C>() {
    using Config = flashjit::MergeStatesConfig<Element<C.input>, Element<C.output>,
                                               C.threads_per_row, C.columns_per_thread>;
    const detail::KernelSpec spec = merge_states_spec(C, detail::kEmulatorArch);
    if constexpr (C.in_place) {
      table.add({spec, &HostLauncher<&merge_state_pair_kernel<Config>>::launch});
    } else {
      table.add({spec, &HostLauncher<&merge_states_kernel<Config>>::launch});
    }
  });
}

}  // namespace flashjit::kernels::emulated
