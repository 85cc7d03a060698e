#pragma once
// Launching a kernel on the emulator: every block of the grid in order, every thread of a block
// a fiber, with the buffers the kernel may touch registered so each access can be checked.
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "emulator/dim3.hpp"
#include "emulator/report.hpp"

namespace flashjit::emulator {

class FiberStacks;

/// A global buffer a launch may read or write.
struct Buffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::string name;
};

/// The buffer of `count` elements at `data`, for LaunchConfig::buffers.
template <class T>
Buffer buffer_of(const T* data, std::size_t count, std::string name) {
  return {data, count * sizeof(T), std::move(name)};
}

struct LaunchConfig {
  std::string kernel_name;  // for reports
  Dim3 grid;
  Dim3 block;
  std::size_t shared_bytes = 0;  // dynamic shared memory per block
  std::vector<Buffer> buffers;   // every global buffer the kernel may touch
  // The stacks the block's threads run on, reused from launch to launch; nullptr: this copy of
  // the emulator's own. Every host-compiled kernel links a copy of the emulator of its own, so
  // the runtime passes one process-wide set: stacks per copy would be mapped once per kernel
  // and kept to the end of the process (a few hundred kernels exhaust the mappings).
  FiberStacks* stacks = nullptr;
};

/// Runs `body(context)` as every thread of every block of `config` (blocks in x-fastest
/// order, one at a time) and returns what the checks found. Not reentrant.
Report run_grid(const LaunchConfig& config, void (*body)(void*), void* context);

/// Launches `kernel(args...)` on the emulator; each thread gets its own copy of the
/// arguments, converted to the kernel's parameter types as a CUDA launch would.
template <class... Params, class... Args>
Report launch(void (*kernel)(Params...), const LaunchConfig& config, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
  struct Call {
    void (*kernel)(Params...);
    std::tuple<Params...> params;
  };
  Call call{kernel, std::tuple<Params...>(std::forward<Args>(args)...)};
  auto invoke = [](void* context) {
    const Call& c = *static_cast<const Call*>(context);
    std::apply(c.kernel, c.params);
  };
  return run_grid(config, invoke, &call);
}

}  // namespace flashjit::emulator
