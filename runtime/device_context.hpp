#pragma once
// One GPU: its primary context, the kernels loaded on it (key -> function), launches.
#include <cuda.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "flashjit/device.hpp"
#include "kernel_cache.hpp"

namespace flashjit::detail {

/// Grid, block, dynamic shared memory and stream of one launch.
struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  /// CTAs of a cluster along x (the kernel declares the same with __cluster_dims__; the
  /// emulator takes it from here).
  unsigned cluster_x = 1;
  std::size_t dynamic_shared_bytes = 0;
  CUstream stream = nullptr;
  /// Programmatic dependent launch: the kernel may start while the one before it in the stream
  /// finishes (sm_90 and later, drivers of CUDA 12.3 and later; elsewhere an ordinary launch).
  /// Only for kernels whose every thread waits for the previous grid before any global access
  /// (tile/semaphore.cuh), which the emulator checks.
  bool overlap_previous = false;
};

/// Whether a launch of `shape` on a device of compute capability `cc_major`, under a driver of
/// `driver_version` (cuDriverGetVersion's 12030 for CUDA 12.3), overlaps the kernel before it:
/// asked for, on Hopper or later, and by a driver that also captures it into CUDA graphs.
bool overlaps_previous_launch(const LaunchShape& shape, int cc_major, int driver_version);

class DeviceContext {
 public:
  /// Retains device `ordinal`'s primary context.
  explicit DeviceContext(int ordinal);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  /// Makes this device's context current on the calling thread.
  void make_current() const;

  /// The loaded function for `spec` (through the process kernel cache), able to use
  /// `dynamic_shared_bytes` of dynamic shared memory (raised above 48 KB when asked). A spec
  /// seen before on this device is found by its fields alone, without its cache key: the
  /// codegen environment is read at a spec's first use here, not on every launch.
  CUfunction function(const KernelSpec& spec, std::size_t dynamic_shared_bytes);
  /// Whether `spec` is loaded here already (its launches touch no cache).
  bool has_loaded(const KernelSpec& spec);

  /// Launches `function` with `args` (pointers to each argument, in order). Ops launch
  /// through the runtime's Executor (executor.hpp), which lands here on the cuda backend.
  void launch(CUfunction function, const LaunchShape& shape, void** args);

  /// The most clusters of `shape` (its cluster_x CTAs of its block and dynamic shared memory)
  /// of `spec` that are resident at once (cuOccupancyMaxActiveClusters): the hardware places a
  /// cluster's CTAs within one GPC, and GPCs hold uneven numbers of SMs, so this can be fewer
  /// than the SMs' CTAs over the cluster size; 0 where the driver refuses the query. Asked of
  /// the driver once per spec and shape.
  int resident_clusters(const KernelSpec& spec, const LaunchShape& shape);

 private:
  struct LoadedKernel {
    CUlibrary library = nullptr;
    CUmodule module = nullptr;  // the fallback when the library API refuses the image
    CUfunction function = nullptr;
    std::size_t dynamic_shared_limit = 48 * 1024;
  };
  LoadedKernel load(const CacheEntry& entry) const;
  LoadedKernel& load_or_find(const KernelSpec& spec);
  CUfunction with_shared_limit(LoadedKernel& kernel, std::size_t dynamic_shared_bytes);

  DeviceInfo info_;
  int driver_version_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::mutex mutex_;
  std::map<std::string, LoadedKernel> loaded_;  // by cache key; nodes never move
  // The launch path's lookup: computing a cache key hashes every template byte, the sorted
  // options and the environment, which repeated launches of one spec need not pay.
  std::unordered_map<KernelSpec, LoadedKernel*, KernelSpecHash> by_spec_;
  // resident_clusters's answers by (function, threads a block, dynamic shared bytes).
  std::map<std::tuple<CUfunction, unsigned, std::size_t>, int> resident_clusters_;
};

}  // namespace flashjit::detail
