#pragma once
// The bridge from an Executor-style launch (a pointer to each argument, nullptr-terminated) to
// a host-compiled kernel's parameters. Shared by the build-time kernel table (the ops' emulated
// instances) and the translation units the emulator backend compiles at run time, which export
// &HostLauncher<&kernel>::launch from a shared object; so this header, with everything it
// includes, is embedded in the library and must compile on its own.
#include <cstddef>
#include <string>
#include <utility>

#include "emulator/launch.hpp"
#include "flashjit/error.hpp"

namespace flashjit::emulator {

/// Runs one host-compiled kernel with `args` as Executor::launch gets them, and returns what
/// the checks found.
using HostLaunchFunction = Report (*)(const LaunchConfig& config, void** args);

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
  /// Checks that `args` holds one pointer per parameter, then runs the grid of `config`.
  static Report launch(const LaunchConfig& config, void** args) {
    check_argument_count(args, sizeof...(Params), config.kernel_name);
    return unpack(config, args, std::index_sequence_for<Params...>{});
  }

 private:
  template <std::size_t... I>
  static Report unpack(const LaunchConfig& config, void** args, std::index_sequence<I...>) {
    return emulator::launch(Kernel, config, *static_cast<const Params*>(args[I])...);
  }
};

}  // namespace flashjit::emulator
