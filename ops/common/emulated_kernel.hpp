#pragma once
// Building blocks of the emulated kernel table (runtime/emulated_kernel_table.hpp), for each op's
// emulated instances (*_emulated.cpp, attention/emulated/), which the host compiler builds with
// FLASHJIT_EMULATOR: the launcher (emulator/host_launcher.hpp), the element type of a dtype, and
// the functions each file defines to add its share of the table.
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>

#include "emulator/host_launcher.hpp"
#include "flashjit/dtype.hpp"
#include "runtime/emulated_kernel_table.hpp"
#include "tile/numeric.cuh"

namespace flashjit::kernels::emulated {

/// The template element type of `dtype`.
template <DType dtype>
using Element = std::conditional_t<dtype == DType::f16, half_t,
                                   std::conditional_t<dtype == DType::bf16, bfloat16_t, float>>;

using emulator::HostLauncher;

template <const auto& Configs, class Add, std::size_t... I>
void for_each_config(Add& add, std::index_sequence<I...>) {
  (add.template operator()<Configs[I]>(), ...);
}

/// Calls `add.template operator()<Configs[i]>()` for every element of the constexpr array
/// `Configs`, each config becoming a template argument.
template <const auto& Configs, class Add>
void for_each_config(Add add) {
  for_each_config<Configs>(add, std::make_index_sequence<std::size(Configs)>{});
}

}  // namespace flashjit::kernels::emulated
