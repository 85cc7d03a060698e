#pragma once
// Building blocks of the emulated kernel table (runtime/emulated_kernels.hpp), for the files of
// kernels/emulated/, which the host compiler builds with FLASHJIT_EMULATOR: a launcher that
// unpacks Executor-style arguments into a host-compiled kernel's parameters, and the functions
// each file defines to add its share of the table.
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "emulator/launch.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/error.hpp"
#include "runtime/emulated_kernels.hpp"
#include "tile/numeric.cuh"

namespace flashjit::kernels::emulated {

/// The template element type of `dtype`.
template <DType dtype>
using Element = std::conditional_t<dtype == DType::f16, half_t,
                                   std::conditional_t<dtype == DType::bf16, bfloat16_t, float>>;

/// Throws unless `args` (nullptr-terminated) holds exactly `expected` pointers. The driver
/// cannot check an argument list; the emulator can, so a wrong one fails loudly here.
inline void check_argument_count(void** args, std::size_t expected, const std::string& kernel) {
  std::size_t given = 0;
  while (given <= expected && args[given] != nullptr) ++given;
  if (given != expected) {
    throw InvalidArgument("args", kernel + " takes " + std::to_string(expected) +
                                      " arguments; the launch passed " +
                                      (given > expected ? "more" : std::to_string(given)));
  }
}

template <auto Kernel>
struct HostLauncher;

/// Runs `Kernel` on the emulator, its arguments read from `args` as the driver reads
/// cuLaunchKernel's: each pointer points at a value of the parameter's exact type.
template <class... Params, void (*Kernel)(Params...)>
struct HostLauncher<Kernel> {
  static emulator::Report launch(const emulator::LaunchConfig& config, void** args) {
    check_argument_count(args, sizeof...(Params), config.kernel_name);
    return unpack(config, args, std::index_sequence_for<Params...>{});
  }

 private:
  template <std::size_t... I>
  static emulator::Report unpack(const emulator::LaunchConfig& config, void** args,
                                 std::index_sequence<I...>) {
    return emulator::launch(Kernel, config, *static_cast<const Params*>(args[I])...);
  }
};

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

// Each file of kernels/emulated/ adds one share of the table (so they compile in parallel).
void add_softmax_kernels(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim8_to_40(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim64(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim64_alternatives(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim80_96(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim128(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim128_alternatives(detail::EmulatedKernelTable& table);
void add_forward_kernels_hdim256(detail::EmulatedKernelTable& table);

}  // namespace flashjit::kernels::emulated
