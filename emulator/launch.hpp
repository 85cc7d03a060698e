#pragma once
// Launching a kernel on the emulator: every block of the grid in order, every thread of a block
// a fiber, with the buffers the kernel may touch registered so each access can be checked.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "emulator/dim3.hpp"
#include "emulator/memory_model.hpp"
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

/// The most blocks a cluster may hold: CUDA's portable cluster size.
inline constexpr unsigned kMaxClusterBlocks = 8;

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
  /// Explores other legal orderings, reproducibly from this seed: TMA loads land at varied
  /// points (as soon as they are issued, between threads' steps) instead of only when no
  /// thread can run, and mbarrier.try_wait sometimes returns false before its phase completes
  /// (its time limit ran out). Unset: the environment variable FLASHJIT_EMULATOR_EXPLORE
  /// gives the seed (a decimal integer); when it is unset or empty too, the default order.
  /// Findings of an explored launch name the seed, so a failure can be replayed.
  std::optional<std::uint64_t> explore_seed = std::nullopt;
  /// Blocks per cluster (each extent divides the grid's; at most kMaxClusterBlocks in all).
  /// A cluster's blocks run together and may reach each other's shared memory: mbarrier
  /// arrivals, TMA multicast, barrier.cluster (cluster.cpp).
  Dim3 cluster = {1, 1, 1};
  /// Models what ncu's memory tables show (memory_model.hpp) for this GPU: shared wavefronts
  /// per request and global sector use per instruction site, bytes in flight, DRAM bytes
  /// through an L2 model. Unset: not modelled (it slows a launch down).
  std::optional<ModelledGpu> memory_model = std::nullopt;
  /// Launched to overlap the grid before it in its stream (programmatic dependent launch): its
  /// blocks may start while that grid still runs, so each thread must wait for it
  /// (griddepcontrol.wait) before any global access; an access before the wait is a finding.
  bool overlaps_previous_grid = false;
};

/// Runs `body(context)` as every thread of every block of `config` (clusters in x-fastest
/// order, one at a time; a cluster's blocks together) and returns what the checks found.
/// Throws std::invalid_argument for a shape CUDA would refuse. Not reentrant.
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
